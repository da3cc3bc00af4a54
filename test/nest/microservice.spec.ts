import type { AddressInfo, Server } from 'node:net';
import { Controller, Logger, Module, type INestMicroservice } from '@nestjs/common';
import { ClientProxyFactory, MessagePattern, Payload, Transport, type ClientProxy } from '@nestjs/microservices';
import { Test } from '@nestjs/testing';
import type Redis from 'ioredis';
import { lastValueFrom } from 'rxjs';
import { DistributedLock, LockService, RedisLockModule, RedisUnavailableError } from '../../lib';
import { connect, testPrefix } from '../support/engine';
import { gate, lockOptions, racyIncrement } from './nest-support';
import { capturingLogger, recordingLockLogger } from './transport-support';

// Two microservices over the TCP transport and one Redis: @MessagePattern handlers exclude across
// them, and a ClientProxy caller gets lock failures as an RpcException's error object it can act on.

const prefix = testPrefix();
let redis: Redis;
const ran = { busy: 0, badKey: 0 };
const lockLogs = recordingLockLogger();

@Controller()
class CounterHandlers {
  @MessagePattern('increment')
  @DistributedLock({ key: 'counter:{data.id}' })
  increment(@Payload() data: { id: string }): Promise<number> {
    return racyIncrement(redis, `${prefix}:count:${data.id}`);
  }

  @MessagePattern('busy')
  @DistributedLock({ key: 'held:{data.id}', waitTime: 0 })
  busy(): boolean {
    ran.busy++;
    return true;
  }

  @MessagePattern('item')
  @DistributedLock({ key: 'item:{data.id}' })
  item(): boolean {
    ran.badKey++;
    return true;
  }

  @MessagePattern('unavailable')
  @DistributedLock({
    key: () => {
      throw new RedisUnavailableError('down', 'lock', 3_000, undefined, '10.0.0.1:6379');
    },
  })
  unavailable(): boolean {
    return true;
  }

  @MessagePattern('bug')
  @DistributedLock({ key: 'bug' })
  bug(): boolean {
    throw new Error('a bug in the handler');
  }
}

@Module({
  imports: [RedisLockModule.forRoot(lockOptions(prefix, { logger: lockLogs }))],
  controllers: [CounterHandlers],
})
class AppModule {}

describe('@DistributedLock on @MessagePattern handlers (TCP transport, two instances)', () => {
  const apps: INestMicroservice[] = [];
  const clients: ClientProxy[] = [];
  const nestLogger = capturingLogger();

  beforeAll(async () => {
    redis = await connect();
    for (let i = 0; i < 2; i++) {
      const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
      const app = moduleRef.createNestMicroservice({
        transport: Transport.TCP,
        options: { host: '127.0.0.1', port: 0 },
        logger: nestLogger,
      });
      await app.listen();
      apps.push(app);
      const { port } = app.unwrap<Server>().address() as AddressInfo;
      const client = ClientProxyFactory.create({ transport: Transport.TCP, options: { host: '127.0.0.1', port } });
      await client.connect();
      clients.push(client);
    }
  });

  afterAll(async () => {
    await Promise.all(clients.map((client) => client.close()));
    await Promise.all(apps.map((app) => app.close()));
    await redis.quit();
    Logger.overrideLogger(false);
  });

  beforeEach(() => {
    nestLogger.error.mockClear();
    lockLogs.clear();
  });

  const send = (i: number, pattern: string, data: unknown) => lastValueFrom(clients[i].send<unknown>(pattern, data));
  const failure = (promise: Promise<unknown>) =>
    promise.then(
      (value) => Promise.reject(new Error(`expected a failure, got ${JSON.stringify(value)}`)),
      (error: unknown) => error as Record<string, unknown>,
    );

  it('serialises a racy handler across both instances', async () => {
    const results = await Promise.all(Array.from({ length: 24 }, (_, i) => send(i % 2, 'increment', { id: 'a' })));
    expect(await redis.get(`${prefix}:count:a`)).toBe('24');
    expect(results.map(Number).sort((x, y) => x - y)).toEqual(Array.from({ length: 24 }, (_, i) => i + 1));
  });

  it('answers a busy lock with LOCK_BUSY, the lock and retryAfterMs, without running the handler or logging an error', async () => {
    const held = gate();
    const entered = gate();
    const holding = apps[0].get(LockService).withLock('held:x', () => (entered.open(), held.promise));
    await entered.promise;
    try {
      const error = await failure(send(1, 'busy', { id: 'x' }));
      expect(error).toEqual({
        status: 'error',
        code: 'LOCK_BUSY',
        error: 'LockAcquireTimeoutError',
        statusCode: 409,
        message: expect.stringContaining('held:x'),
        lock: 'held:x',
        retryAfterMs: expect.any(Number),
      });
      expect(error.retryAfterMs).toBeGreaterThan(0);
    } finally {
      held.open();
      await holding;
    }
    expect(ran.busy).toBe(0);
    expect(nestLogger.error).not.toHaveBeenCalled();
    expect(lockLogs.lines.debug).toEqual([expect.stringContaining('CounterHandlers.busy: LOCK_BUSY')]);
    expect(await send(1, 'busy', { id: 'x' })).toBe(true);
  });

  it('answers a missing key value with BAD_USER_INPUT, without running the handler or logging an error', async () => {
    const error = await failure(send(0, 'item', {}));
    expect(error).toMatchObject({
      status: 'error',
      code: 'BAD_USER_INPUT',
      error: 'LockKeyError',
      statusCode: 400,
      placeholder: '{data.id}',
    });
    expect(ran.badKey).toBe(0);
    expect(nestLogger.error).not.toHaveBeenCalled();
    expect(lockLogs.lines.debug).toEqual([expect.stringContaining('CounterHandlers.item: BAD_USER_INPUT')]);
  });

  it('answers Redis unavailable with LOCK_UNAVAILABLE, logged at warn', async () => {
    const error = await failure(send(0, 'unavailable', {}));
    expect(error).toMatchObject({ status: 'error', code: 'LOCK_UNAVAILABLE', statusCode: 503 });
    expect(JSON.stringify(error)).not.toContain('10.0.0.1');
    expect(nestLogger.error).not.toHaveBeenCalled();
    expect(lockLogs.lines.warnings).toEqual([expect.stringContaining('10.0.0.1:6379')]);
  });

  it("leaves a handler's own error alone: Internal server error, logged as Nest's ERROR", async () => {
    const error = await failure(send(0, 'bug', {}));
    expect(error).toEqual({ status: 'error', message: 'Internal server error' });
    expect(nestLogger.error).toHaveBeenCalledTimes(1);
  });
});
