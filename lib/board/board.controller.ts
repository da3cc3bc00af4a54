import {
  applyDecorators,
  BadRequestException,
  Body,
  ConflictException,
  ForbiddenException,
  Get,
  Header,
  Headers,
  HttpCode,
  Inject,
  Post,
  Req,
  ServiceUnavailableException,
} from '@nestjs/common';
import { LockOptionsError, RedisUnavailableError } from '../engine/errors';
import { assertLockName } from '../engine/util/validation';
import type { BoardKind } from './board-lock';
import type { BoardSettings } from './board-options';
import { boardAsset, boardPage, BOARD_HEADERS } from './board-page';
import { BOARD_SETTINGS } from './board.constants';
import { BoardConflict, LockBoard, type BoardState } from './lock-board';

/** Every response of the board carries BOARD_HEADERS. */
const BoardHeaders = () =>
  applyDecorators(...Object.entries(BOARD_HEADERS).map(([name, value]) => Header(name, value)));

/** The header a force-unlock must carry: a cross-site form cannot set it, and a cross-site script needs CORS to. */
export const ACTION_HEADER = 'x-lock-board';

const KINDS: readonly BoardKind[] = ['reentrant', 'fair', 'simple', 'read-write', 'semaphore'];

/** The request as both Express and Fastify give it. */
interface BoardRequest {
  url: string;
  originalUrl?: string;
}

/**
 * The board's routes, relative to its `route`: the page, its script and stylesheet, the state it polls
 * and the force-unlock. RedisLockBoardModule makes a subclass at the configured route, with its guard.
 */
export class LockBoardController {
  constructor(
    @Inject(LockBoard) private readonly board: LockBoard,
    @Inject(BOARD_SETTINGS) private readonly settings: BoardSettings,
  ) {}

  @Get()
  @BoardHeaders()
  @Header('Content-Type', 'text/html; charset=utf-8')
  page(@Req() request: BoardRequest): string {
    // Links relative to where the page was asked for, so a global prefix or a proxy's path still works.
    const base = (request.originalUrl ?? request.url).split('?')[0].replace(/\/+$/, '');
    const { title, refreshMs, forceUnlock } = this.settings;
    return boardPage({ title, base, refreshMs, forceUnlock });
  }

  @Get('board.js')
  @BoardHeaders()
  @Header('Content-Type', 'text/javascript; charset=utf-8')
  script(): string {
    return boardAsset('board.js');
  }

  @Get('board.css')
  @BoardHeaders()
  @Header('Content-Type', 'text/css; charset=utf-8')
  stylesheet(): string {
    return boardAsset('board.css');
  }

  @Get('state')
  @BoardHeaders()
  state(): Promise<BoardState> {
    return this.board.state();
  }

  @Post('force-unlock')
  @HttpCode(200)
  @BoardHeaders()
  async forceUnlock(
    @Headers(ACTION_HEADER) marker: string | undefined,
    @Body() body: unknown,
  ): Promise<{ unlocked: boolean; holders: string[] }> {
    if (!this.settings.forceUnlock) {
      throw new ForbiddenException(
        'The lock board is read-only: force-unlock is off (RedisLockBoardModule.forRoot({ forceUnlock: true }) turns it on).',
      );
    }
    if (marker !== '1')
      throw new ForbiddenException(`A force-unlock must come from the board (header ${ACTION_HEADER}).`);
    const { name, kind, holder } = (body ?? {}) as { name?: unknown; kind?: unknown; holder?: unknown };
    try {
      assertLockName(name);
      if (!KINDS.includes(kind as BoardKind)) throw new LockOptionsError(`kind must be one of ${KINDS.join(', ')}.`);
      if (typeof holder !== 'string' || holder === '')
        throw new LockOptionsError('holder must name the holder the confirmation showed.');
      return await this.board.forceUnlock(name, kind as BoardKind, holder);
    } catch (error) {
      if (error instanceof LockOptionsError) throw new BadRequestException(error.message);
      if (error instanceof BoardConflict) throw new ConflictException(error.message);
      if (error instanceof RedisUnavailableError)
        throw new ServiceUnavailableException('Redis did not answer in time.');
      throw error;
    }
  }
}
