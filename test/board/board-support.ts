/** Helpers of the lock board's tests: a Nest app with RedisLockModule and the board, on Express or Fastify. */
import {
  type DynamicModule,
  Inject,
  Injectable,
  Module,
  type CanActivate,
  type ExecutionContext,
  type INestApplication,
} from '@nestjs/common';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { Test } from '@nestjs/testing';
import { LockClient, RedisLockModule, type ConnectionOptions } from '../../lib';
import { RedisLockBoardModule, type BoardState, type RedisLockBoardOptions } from '../../lib/board';
import { quietLogger, singlePort } from '../support/engine';

/**
 * Lets a request in when it carries `x-admin: yes`. A class with a dependency of its own, as a real
 * guard has: Nest builds it in the board's module.
 */
@Injectable()
export class AdminHeaderGuard implements CanActivate {
  constructor(@Inject(LockClient) private readonly locks: LockClient) {}

  canActivate(context: ExecutionContext): boolean {
    const request = context.switchToHttp().getRequest<{ headers: Record<string, string> }>();
    return this.locks instanceof LockClient && request.headers['x-admin'] === 'yes';
  }
}

export interface BoardApp {
  app: INestApplication;
  url: string;
  locks: LockClient;
  close(): Promise<void>;
}

/** An app with the board at /locks (unless `board.route`), listening on 127.0.0.1:0. */
export async function boardApp(
  prefix: string,
  board: RedisLockBoardOptions | DynamicModule,
  options: { platform?: 'express' | 'fastify'; connection?: ConnectionOptions } = {},
): Promise<BoardApp> {
  const connection = options.connection ?? { type: 'single', host: '127.0.0.1', port: singlePort() };
  @Module({
    imports: [
      RedisLockModule.forRoot({ connection, keyPrefix: prefix, logger: quietLogger, telemetry: false }),
      'module' in board ? board : RedisLockBoardModule.forRoot(board),
    ],
  })
  class AppModule {}
  const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
  const app: INestApplication =
    options.platform === 'fastify'
      ? moduleRef.createNestApplication(new FastifyAdapter(), { logger: false })
      : moduleRef.createNestApplication({ logger: false });
  try {
    await app.listen(0, '127.0.0.1');
  } catch (error) {
    await app.close(); // its Redis connections, so jest can exit
    throw error;
  }
  const url = (await app.getUrl()).replace('[::1]', '127.0.0.1');
  return { app, url, locks: app.get(LockClient), close: () => app.close() };
}

/**
 * The board's state once `ok` holds, reading it again every refresh (up to `withinMs`): a scan bounded
 * per refresh may take a few refreshes to reach a new lock on a server with many keys.
 */
export async function stateWhen(
  read: () => Promise<BoardState>,
  ok: (state: BoardState) => boolean,
  withinMs = 10_000,
): Promise<BoardState> {
  const until = Date.now() + withinMs;
  for (;;) {
    const state = await read();
    if (ok(state) || Date.now() > until) return state;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
