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
import {
  asyncBoardSettings,
  boardSettings,
  type BoardSettings,
  type RedisLockBoardAsyncOptions,
  type RedisLockBoardOptions,
} from './board-options';
import { LockBoardController } from './board.controller';
import { BOARD_SETTINGS } from './board.constants';
import { LockBoard } from './lock-board';
import { LockBoardOptionsError } from './lock-board-options-error';

/** The board over the application's LockClient. */
const boardProvider = {
  provide: LockBoard,
  inject: [LockClient, BOARD_SETTINGS],
  useFactory: (client: LockClient, board: BoardSettings) => new LockBoard(client, board),
};

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
      providers: [{ provide: BOARD_SETTINGS, useValue: settings }, boardProvider],
    };
  }

  /**
   * The board with options from a factory (e.g. from ConfigService); the route and the guard (or
   * `public: true`) are given here, and checked at once. The factory's options are checked at start-up.
   * @example
   * RedisLockBoardModule.forRootAsync({
   *   route: '/locks',
   *   guard: AdminGuard,
   *   inject: [ConfigService],
   *   useFactory: (config: ConfigService) => ({ forceUnlock: config.get('LOCK_BOARD_ACTIONS') === 'on' }),
   * })
   */
  static forRootAsync(options: RedisLockBoardAsyncOptions): DynamicModule {
    if (options === null || typeof options !== 'object' || typeof options.useFactory !== 'function') {
      throw new LockBoardOptionsError(
        'RedisLockBoardModule.forRootAsync needs { useFactory, inject?, route?, guard | public }.',
      );
    }
    const { route, guard, public: open } = options;
    const fixed = boardSettings({ route, guard, public: open });
    const factory = options.useFactory as (...args: unknown[]) => unknown;
    return {
      module: RedisLockBoardModule,
      imports: options.imports ?? [],
      controllers: [controllerAt(fixed)],
      providers: [
        {
          provide: BOARD_SETTINGS,
          inject: options.inject ?? [],
          useFactory: async (...args: unknown[]) => asyncBoardSettings(options, await factory(...args)),
        },
        boardProvider,
      ],
    };
  }

  /** Stops listening to the client's events. */
  onModuleDestroy(): void {
    this.board.close();
  }
}
