import {
  Controller,
  Inject,
  Module,
  UseGuards,
  type DynamicModule,
  type OnModuleDestroy,
  type Type,
} from '@nestjs/common';
import { LockClient } from '../engine/client/lock-client';
import { boardSettings, type BoardSettings, type RedisLockBoardOptions } from './board-options';
import { LockBoardController } from './board.controller';
import { BOARD_SETTINGS } from './board.constants';
import { LockBoard } from './lock-board';

/** The controller at `route`, behind `guard` when there is one. */
function controllerAt(settings: BoardSettings): Type {
  @Controller(settings.route)
  class RedisLockBoardController extends LockBoardController {}
  if (settings.guard) UseGuards(settings.guard)(RedisLockBoardController);
  return RedisLockBoardController;
}

/**
 * A live page of the locks under the application's key prefix: holders, waiters, fair queues,
 * semaphore permits, recent events and per-label timings, with an optional force-unlock. Needs the
 * LockClient of RedisLockModule (global by default). Refuses to start without a `guard` or `public: true`.
 * @example
 * @Module({
 *   imports: [
 *     RedisLockModule.forRoot({ connection: { type: 'single', url: process.env.REDIS_URL } }),
 *     RedisLockBoardModule.forRoot({ route: '/locks', guard: AdminGuard }),
 *   ],
 * })
 * export class AppModule {}
 */
@Module({})
export class RedisLockBoardModule implements OnModuleDestroy {
  constructor(@Inject(LockBoard) private readonly board: LockBoard) {}

  /** The board at `options.route` (default 'locks'); throws LockBoardOptionsError on unusable options. */
  static forRoot(options: RedisLockBoardOptions): DynamicModule {
    const settings = boardSettings(options);
    return {
      module: RedisLockBoardModule,
      imports: options.imports ?? [],
      controllers: [controllerAt(settings)],
      providers: [
        { provide: BOARD_SETTINGS, useValue: settings },
        {
          provide: LockBoard,
          inject: [LockClient, BOARD_SETTINGS],
          useFactory: (client: LockClient, board: BoardSettings) => new LockBoard(client, board),
        },
      ],
    };
  }

  /** Stops listening to the client's events. */
  onModuleDestroy(): void {
    this.board.close();
  }
}
