import type { CanActivate, FactoryProvider, ModuleMetadata, Type } from '@nestjs/common';
import { show } from '../engine/util/validation';
import { LockBoardOptionsError } from './lock-board-options-error';

/** The options of `RedisLockBoardModule.forRoot`. Times in milliseconds. */
export interface RedisLockBoardOptions {
  /** Where the board is served, e.g. `'/locks'` (under any global prefix of the application). Default 'locks'. */
  route?: string;
  /**
   * Who may see the board: a guard class (built by Nest, with its dependencies) or instance, applied to
   * every route of the board. Required unless `public: true`.
   */
  guard?: Type<CanActivate> | CanActivate;
  /** Serves the board without a guard (e.g. on an internal port). Must be said explicitly. */
  public?: boolean;
  /** Offers force-unlock on held locks (with a confirmation naming the holder). Default false: read-only. */
  forceUnlock?: boolean;
  /** How often the page refreshes, and the least time between two reads of Redis. Default 1000, 250..60000. */
  refreshMs?: number;
  /** The most locks read per refresh (one script each). Default 100, 1..1000. */
  maxLocks?: number;
  /** Keys examined per refresh by SCAN, over every master; a larger keyspace is covered over several refreshes. Default 1000, 10..100000. */
  scanPerRefresh?: number;
  /** Recent events kept in memory. Default 200, 1..5000. */
  maxEvents?: number;
  /** Labels with statistics of their own; more share one row. Default 50, 1..500. */
  maxLabels?: number;
  /** The page's title. Default 'Locks'. */
  title?: string;
  /** Modules to import, e.g. where the LockClient comes from when RedisLockModule is not global. */
  imports?: ModuleMetadata['imports'];
}

/** What `forRootAsync`'s factory gives: everything but where the board is and who may see it. */
export type RedisLockBoardRuntimeOptions = Omit<RedisLockBoardOptions, 'route' | 'guard' | 'public' | 'imports'>;

/**
 * `RedisLockBoardModule.forRootAsync`: the route and the guard (or `public: true`) are fixed when the
 * module is imported, since they shape its controller; the rest comes from `useFactory` at start-up.
 */
export interface RedisLockBoardAsyncOptions extends Pick<
  RedisLockBoardOptions,
  'route' | 'guard' | 'public' | 'imports'
> {
  /** Providers handed to `useFactory`, e.g. `[ConfigService]`. */
  inject?: FactoryProvider['inject'];
  useFactory: (...args: never[]) => RedisLockBoardRuntimeOptions | Promise<RedisLockBoardRuntimeOptions>;
}

/** The options with their defaults, checked. */
export interface BoardSettings {
  route: string;
  guard?: Type<CanActivate> | CanActivate;
  forceUnlock: boolean;
  refreshMs: number;
  maxLocks: number;
  scanPerRefresh: number;
  maxEvents: number;
  maxLabels: number;
  title: string;
}

const KNOWN = new Set<string>([
  'route',
  'guard',
  'public',
  'forceUnlock',
  'refreshMs',
  'maxLocks',
  'scanPerRefresh',
  'maxEvents',
  'maxLabels',
  'title',
  'imports',
]);

/** A path of plain segments: nothing to escape in a URL or the page. */
const ROUTE = /^\/?[A-Za-z0-9._~-]+(?:\/[A-Za-z0-9._~-]+)*\/?$/;

function whole(
  options: RedisLockBoardOptions,
  option: keyof RedisLockBoardOptions,
  fallback: number,
  min: number,
  max: number,
): number {
  const value = options[option];
  if (value === undefined) return fallback;
  if (typeof value === 'number' && Number.isInteger(value) && value >= min && value <= max) return value;
  throw new LockBoardOptionsError(
    `RedisLockBoardModule: ${option} must be a whole number in ${min}..${max}, got ${show(value)}.`,
    undefined,
    {
      option,
      value,
    },
  );
}

/** Checks the options (LockBoardOptionsError on the first unusable one) and fills in the defaults. */
export function boardSettings(options: RedisLockBoardOptions | undefined): BoardSettings {
  if (options === null || typeof options !== 'object') {
    throw new LockBoardOptionsError(`RedisLockBoardModule.forRoot needs an options object, got ${show(options)}.`);
  }
  const unknown = Object.keys(options).filter((key) => !KNOWN.has(key));
  if (unknown.length > 0) {
    throw new LockBoardOptionsError(`RedisLockBoardModule: unknown option ${unknown.join(', ')}.`, undefined, {
      option: unknown[0],
    });
  }
  const { guard } = options;
  const isGuard =
    typeof guard === 'function' ||
    (typeof guard === 'object' && guard !== null && typeof guard.canActivate === 'function');
  if (guard !== undefined && !isGuard) {
    throw new LockBoardOptionsError(
      `RedisLockBoardModule: guard must be a CanActivate class or instance, got ${show(guard)}.`,
      undefined,
      {
        option: 'guard',
        value: guard,
      },
    );
  }
  if (options.public !== undefined && typeof options.public !== 'boolean') {
    throw new LockBoardOptionsError(
      `RedisLockBoardModule: public must be true or false, got ${show(options.public)}.`,
      undefined,
      {
        option: 'public',
        value: options.public,
      },
    );
  }
  if (guard === undefined && options.public !== true) {
    throw new LockBoardOptionsError(
      'RedisLockBoardModule shows every lock, holder and waiter of your application: pass a guard ' +
        '(forRoot({ guard: AdminGuard })) or say it is meant to be open (forRoot({ public: true }), e.g. on an internal port).',
      undefined,
      { option: 'guard' },
    );
  }
  if (guard !== undefined && options.public === true) {
    throw new LockBoardOptionsError('RedisLockBoardModule: pass a guard or public: true, not both.', undefined, {
      option: 'public',
    });
  }
  const route = options.route ?? 'locks';
  if (typeof route !== 'string' || !ROUTE.test(route)) {
    throw new LockBoardOptionsError(
      `RedisLockBoardModule: route must be a path such as '/locks' (letters, digits, . _ ~ - and /), got ${show(route)}.`,
      undefined,
      {
        option: 'route',
        value: route,
      },
    );
  }
  if (options.forceUnlock !== undefined && typeof options.forceUnlock !== 'boolean') {
    throw new LockBoardOptionsError(
      `RedisLockBoardModule: forceUnlock must be true or false, got ${show(options.forceUnlock)}.`,
      undefined,
      {
        option: 'forceUnlock',
        value: options.forceUnlock,
      },
    );
  }
  const title = options.title ?? 'Locks';
  if (typeof title !== 'string' || title.length === 0 || title.length > 200) {
    throw new LockBoardOptionsError(
      `RedisLockBoardModule: title must be a string of 1 to 200 characters, got ${show(title)}.`,
      undefined,
      {
        option: 'title',
        value: title,
      },
    );
  }
  return {
    route: route.replace(/^\/+|\/+$/g, ''),
    guard,
    forceUnlock: options.forceUnlock ?? false,
    refreshMs: whole(options, 'refreshMs', 1000, 250, 60_000),
    maxLocks: whole(options, 'maxLocks', 100, 1, 1000),
    scanPerRefresh: whole(options, 'scanPerRefresh', 1000, 10, 100_000),
    maxEvents: whole(options, 'maxEvents', 200, 1, 5000),
    maxLabels: whole(options, 'maxLabels', 50, 1, 500),
    title,
  };
}

/** `forRootAsync`'s factory's options over the fixed ones, checked like forRoot's. */
export function asyncBoardSettings(fixed: RedisLockBoardAsyncOptions, made: unknown): BoardSettings {
  if (made === null || typeof made !== 'object') {
    throw new LockBoardOptionsError(
      `RedisLockBoardModule.forRootAsync: useFactory must return an options object, got ${show(made)}.`,
    );
  }
  const misplaced = ['route', 'guard', 'public', 'imports'].filter((key) => key in made);
  if (misplaced.length > 0) {
    throw new LockBoardOptionsError(
      `RedisLockBoardModule.forRootAsync: ${misplaced.join(', ')} must be given to forRootAsync itself, not returned by useFactory.`,
      undefined,
      { option: misplaced[0] },
    );
  }
  const { route, guard, public: open } = fixed;
  return boardSettings({ ...(made as RedisLockBoardRuntimeOptions), route, guard, public: open });
}
