import { Controller, Get, Injectable, Logger, Module, type INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import Redis from 'ioredis';
import {
  DistributedLock,
  LockClient,
  LockOptionsError,
  LockService,
  RedisRefusedError,
  RedisUnavailableError,
  RedisLockModule,
  type RedisLockModuleOptions,
  type RedisLockOptionsFactory,
  runInLockScope,
} from '../../lib';
import { engineOf, nestLockLogger, REDIS_LOCK_MODULE_OPTIONS } from '../../lib/internal';
import { connect, quietLogger, singlePort, testPrefix } from '../support/engine';
import { connectionsNamed, lockKey, lockOptions, singleConnection } from './nest-support';

const prefix = testPrefix();

/** A ConfigModule look-alike: options come from an injected provider. */
@Injectable()
class ConfigService {
  readonly values: Record<string, unknown> = { port: singlePort(), prefix: `${prefix}-async`, waitTime: 1_234 };
  get<T>(key: string): T {
    return this.values[key] as T;
  }
}

@Module({ providers: [ConfigService], exports: [ConfigService] })
class ConfigModule {}

@Injectable()
class LockOptionsFactory implements RedisLockOptionsFactory {
  constructor(private readonly config: ConfigService) {}
  createRedisLockOptions(): RedisLockModuleOptions {
    return lockOptions(this.config.get('prefix'));
  }
}

@Injectable()
class FeatureService {
  constructor(readonly locks: LockService) {}
}

/** Does not import RedisLockModule: relies on it being global. */
@Module({ providers: [FeatureService], exports: [FeatureService] })
class FeatureModule {}

async function boot(imports: unknown[]): Promise<INestApplication> {
  const moduleRef = await Test.createTestingModule({ imports: imports as [] }).compile();
  const app = moduleRef.createNestApplication({ logger: false });
  await app.init();
  return app;
}

async function bootError(imports: unknown[]): Promise<Error> {
  let app: INestApplication | undefined;
  try {
    app = await boot(imports);
  } catch (error) {
    return error as Error;
  }
  await app.close();
  throw new Error('the application started');
}

describe('RedisLockModule', () => {
  let redis: Redis;

  beforeAll(() => {
    redis = connect();
  });
  afterAll(async () => {
    await redis.quit();
  });

  it('forRoot: global by default, LockService and LockClient injectable anywhere', async () => {
    const app = await boot([RedisLockModule.forRoot(lockOptions(prefix)), FeatureModule]);
    try {
      const feature = app.get(FeatureService);
      expect(feature.locks).toBe(app.get(LockService));
      expect(feature.locks.client).toBe(app.get(LockClient));
      expect(feature.locks.client.keyPrefix).toBe(prefix);
      await feature.locks.withLock('global', async () => {
        expect(await redis.exists(lockKey(prefix, 'global'))).toBe(1);
      });
    } finally {
      await app.close();
    }
  });

  it('forRoot and forRootAsync are global unless isGlobal: false', async () => {
    expect(RedisLockModule.forRoot(lockOptions(prefix)).global).toBe(true);
    expect(RedisLockModule.forRootAsync({ useFactory: () => lockOptions(prefix) }).global).toBe(true);
    const local = RedisLockModule.forRoot({ ...lockOptions(prefix), isGlobal: false });
    expect(local.global).toBe(false);
    // isGlobal is not part of the options the module sees.
    const app = await boot([local]);
    try {
      expect(app.get(REDIS_LOCK_MODULE_OPTIONS)).not.toHaveProperty('isGlobal');
      expect(app.get(LockService)).toBeInstanceOf(LockService);
    } finally {
      await app.close();
    }
  });

  it('forRootAsync with imports, an injected factory and its options', async () => {
    const app = await boot([
      RedisLockModule.forRootAsync({
        imports: [ConfigModule],
        inject: [ConfigService],
        useFactory: (config: ConfigService) =>
          lockOptions(config.get('prefix'), {
            connection: { type: 'single', port: config.get<number>('port') },
            waitTime: config.get('waitTime'),
          }),
      }),
      FeatureModule,
    ]);
    try {
      expect(app.get(LockClient).keyPrefix).toBe(`${prefix}-async`);
      expect(app.get(REDIS_LOCK_MODULE_OPTIONS)).toMatchObject({ waitTime: 1_234 });
      expect(app.get(FeatureService).locks).toBe(app.get(LockService));
    } finally {
      await app.close();
    }
  });

  it('forRootAsync with useClass and with useExisting', async () => {
    for (const async of [
      { imports: [ConfigModule], useClass: LockOptionsFactory },
      {
        imports: [
          {
            module: class FactoryModule {},
            imports: [ConfigModule],
            providers: [LockOptionsFactory],
            exports: [LockOptionsFactory],
          },
        ],
        useExisting: LockOptionsFactory,
      },
    ]) {
      const app = await boot([RedisLockModule.forRootAsync(async)]);
      try {
        expect(app.get(LockClient).keyPrefix).toBe(`${prefix}-async`);
      } finally {
        await app.close();
      }
    }
  });

  it('fails at startup with every problem of bad options listed', async () => {
    const error = await bootError([
      RedisLockModule.forRoot({
        connection: { type: 'bogus' } as never,
        keyPrefix: 'a{b}',
        waitTime: -5,
        leaseTime: 0,
        watchdogTimeout: Number.NaN,
        turnTime: '10' as never,
        idleKeyTtl: 86_400_001,
        conflictStatus: 200,
      }),
    ]);
    expect(error).toBeInstanceOf(LockOptionsError);
    expect(error.message).toContain('RedisLockModule options are invalid');
    for (const option of [
      'connection: type must be one of',
      'keyPrefix',
      'waitTime',
      'leaseTime',
      'watchdogTimeout',
      'turnTime',
      'idleKeyTtl',
      'conflictStatus',
    ]) {
      expect(error.message).toContain(option);
    }
  });

  it('refuses a connection whose address is an unset environment variable, instead of connecting to localhost', async () => {
    for (const connection of [
      { type: 'single', url: undefined },
      { type: 'single', host: '' },
    ] as const) {
      const error = await bootError([RedisLockModule.forRoot({ connection, logger: quietLogger })]);
      expect(error).toBeInstanceOf(LockOptionsError);
      expect(error.message).toMatch(/(url|host) is (undefined|""): is its environment variable unset\? Leave/);
    }
  });

  it('says at start-up which deployment and address it locks on (described without credentials)', async () => {
    const logged: string[] = [];
    const logger = { ...quietLogger, log: (message: string) => logged.push(message) };
    const prefix = testPrefix();
    const url = `redis://127.0.0.1:${singlePort()}`;
    const app = await boot([
      RedisLockModule.forRoot({ connection: { type: 'single', url }, keyPrefix: prefix, logger }),
    ]);
    await app.close();
    expect(logged).toEqual([`Locks on 127.0.0.1:${singlePort()} (key prefix "${prefix}").`]);
  });

  it('fails at startup when Redis cannot be reached within the connect budget, naming the cause', async () => {
    const startedAt = Date.now();
    const error = await bootError([
      RedisLockModule.forRoot(
        lockOptions(prefix, {
          // Connecting may take 3 operation timeouts: 900 ms here.
          operationTimeout: 300,
          // ioredis waits disconnectTimeout (2 s) for a socket that failed to connect to close: keep it short here.
          connection: { type: 'single', port: 1, redisOptions: { disconnectTimeout: 50 } },
        }),
      ),
    ]);
    expect(error).toBeInstanceOf(RedisUnavailableError);
    expect(error).toMatchObject({ name: 'RedisUnavailableError', address: '127.0.0.1:1' });
    // The last refused attempt is the cause, not the deadline.
    expect(error.message).toMatch(/^Could not connect to Redis at 127\.0\.0\.1:1 within 900 ms: connect ECONNREFUSED/);
    expect(Date.now() - startedAt).toBeLessThan(10_000);
  });

  it('fails at startup when its Redis user may not use the lock channels, naming what to grant', async () => {
    // Redis 7 gives a new user no channels: it could take uncontended locks, and fail at the first wait.
    const user = `no-channels-${prefix}`;
    await redis.call('ACL', 'SETUSER', user, 'on', '>x', `~${prefix}:*`, 'resetchannels', '+@all');
    try {
      const connectionName = `channels-${prefix}`;
      const connection = singleConnection(connectionName);
      connection.redisOptions = { ...connection.redisOptions, username: user, password: 'x' };
      const error = await bootError([RedisLockModule.forRoot(lockOptions(prefix, { connection }))]);
      expect(error).toBeInstanceOf(RedisRefusedError);
      expect(error).toMatchObject({ name: 'RedisRefusedError', code: 'NOPERM' });
      expect(error.message).toContain(`Grant the user the lock channels: &${prefix}:*`);
      expect(await connectionsNamed(redis, connectionName)).toBe(0);
    } finally {
      await redis.call('ACL', 'DELUSER', user);
    }
  });

  it('fails at startup on an invalid @DistributedLock, naming the class and method, leaving no connection', async () => {
    @Controller()
    class BrokenController {
      @Get(':id')
      @DistributedLock({ key: 'article:{params.id', waitTime: -1 })
      get() {
        return 'never';
      }
    }
    @Injectable()
    class BrokenJob {
      @DistributedLock({ key: 'job:{params.id}' })
      async run() {}
    }
    const connectionName = `broken-${prefix}`;
    const options = lockOptions(prefix, { connection: singleConnection(connectionName) });
    for (const [controllers, providers, words] of [
      [[BrokenController], [], ['BrokenController.get', 'unclosed "{"', 'waitTime']],
      [[], [BrokenJob], ['BrokenJob.run', '{params.id} cannot be used on a method that is not a route']],
    ] as const) {
      @Module({ imports: [RedisLockModule.forRoot(options)], controllers: [...controllers], providers: [...providers] })
      class AppModule {}
      const error = await bootError([AppModule]);
      for (const word of words) expect(error.message).toContain(word);
    }
    expect(await connectionsNamed(redis, connectionName)).toBe(0);
  });

  it('on app.close() releases held locks and closes its connections', async () => {
    const connectionName = `close-${prefix}`;
    const app = await boot([
      RedisLockModule.forRoot(lockOptions(prefix, { connection: singleConnection(connectionName) })),
    ]);
    const locks = app.get(LockService);
    await locks.lock('held-at-close'); // watchdog lease, never released by the test
    await locks.lock('held-with-lease', { leaseTime: 60_000 });
    expect(await connectionsNamed(redis, connectionName)).toBe(2); // commands + subscriber
    expect(engineOf(locks.client).watchdog.size).toBe(1);
    await app.close();
    expect(await redis.exists(lockKey(prefix, 'held-at-close'))).toBe(0);
    expect(await redis.exists(lockKey(prefix, 'held-with-lease'))).toBe(0);
    expect(engineOf(locks.client).watchdog.size).toBe(0);
    expect(await connectionsNamed(redis, connectionName)).toBe(0);
  });

  it('leaves a client passed in open, closing only the subscriber it duplicated', async () => {
    const connectionName = `lent-${prefix}`;
    const client = new Redis({ host: '127.0.0.1', port: singlePort(), connectionName });
    try {
      const app = await boot([
        RedisLockModule.forRoot(lockOptions(prefix, { connection: { type: 'client', client } })),
      ]);
      await app.get(LockService).withLock('lent', () => undefined, { waitTime: 0 });
      await app.close();
      expect(await client.ping()).toBe('PONG');
      expect(await connectionsNamed(redis, connectionName)).toBe(1);
    } finally {
      await client.quit();
    }
  });

  it('logs through a Nest logger by default', () => {
    const logger = new Logger('Test');
    const warn = jest.spyOn(logger, 'warn').mockImplementation(() => undefined);
    const error = jest.spyOn(logger, 'error').mockImplementation(() => undefined);
    const adapter = nestLockLogger(logger);
    adapter.warn('lost');
    adapter.error('failed');
    expect(warn).toHaveBeenCalledWith('lost');
    expect(error).toHaveBeenCalledWith('failed');
  });
});

describe('LockService', () => {
  let app: INestApplication;
  let locks: LockService;
  let redis: Redis;
  const servicePrefix = `${prefix}-svc`;

  beforeAll(async () => {
    redis = connect();
    app = await boot([RedisLockModule.forRoot(lockOptions(servicePrefix, { waitTime: 200, leaseTime: 2_000 }))]);
    locks = app.get(LockService);
  });
  afterAll(async () => {
    await app?.close();
    await redis.quit();
  });

  it('applies the module defaults; Infinity and "watchdog" ask for the engine’s unlimited ones', async () => {
    const handle = await locks.lock('defaults');
    const ttl = await locks.remainTimeToLive('defaults');
    expect(ttl).toBeGreaterThan(1_000);
    expect(ttl).toBeLessThanOrEqual(2_000); // module leaseTime
    expect(engineOf(locks.client).watchdog.size).toBe(0);

    const other = await Promise.resolve().then(() =>
      locks.withLock('defaults', () => 'never', { newScope: true }).catch((e: Error) => e),
    );
    expect((other as Error).name).toBe('LockAcquireTimeoutError'); // module waitTime 200
    await handle.release();

    const watched = await locks.lock('watched', { leaseTime: 'watchdog', waitTime: Infinity });
    expect(engineOf(locks.client).watchdog.size).toBe(1);
    await watched.release();
  });

  it('offers every kind and the inspection operations', async () => {
    expect(await locks.withLock('kinds', (lock) => lock.kind, { kind: 'fair' })).toBe('fair');
    expect(await locks.fair('kinds').isLocked()).toBe(false);

    const simple = await locks.lock('simple', { kind: 'simple' });
    expect(await locks.isLocked('simple')).toBe(true);
    expect(await locks.tryLock('simple', { kind: 'simple' })).toBeNull();
    expect(await locks.forceUnlock('simple', { kind: 'simple' })).toBe(true);
    expect(await simple.release()).toBe('expired');

    const multi = await locks.multi(['m1', locks.reentrant('m2')]).lock();
    expect(await locks.isLocked('m1')).toBe(true);
    expect(await locks.isLocked('m2')).toBe(true);
    await multi.release();

    const redLock = locks.redLock('red', [locks.client]);
    await redLock.withLock(async () => expect(await locks.isLocked('red')).toBe(true), { leaseTime: 1_000 });

    expect(await locks.remainTimeToLive('nothing')).toBe(-2);
    expect(locks.current()).toBeUndefined();
  });

  it('unlock releases a hold of the current scope; current() follows nested withLock calls', async () => {
    await runInLockScope(async () => {
      await locks.lock('scoped');
      expect(await locks.unlock('scoped')).toBe('released');
    });
    await locks.withLock('outer', async (outer) => {
      expect(locks.current()).toMatchObject({ name: 'outer', fencingToken: outer.fencingToken });
      await locks.withLock('inner', async () => expect(locks.current()?.name).toBe('inner'));
      expect(locks.current()?.name).toBe('outer');
    });
    expect(locks.current()).toBeUndefined();
    await expect(locks.lock('x', { kind: 'spin' as never })).rejects.toThrow(/kind must be one of/);
  });
});
