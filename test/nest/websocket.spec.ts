import { Logger, Module, type INestApplication } from '@nestjs/common';
import { MessageBody, SubscribeMessage, WebSocketGateway } from '@nestjs/websockets';
import { Test } from '@nestjs/testing';
import type Redis from 'ioredis';
import { io, type Socket } from 'socket.io-client';
import { DistributedLock, LockService, RedisLockModule, RedisUnavailableError } from '../../lib';
import { connect, testPrefix } from '../support/engine';
import { gate, listen, lockOptions, racyIncrement } from './nest-support';
import { capturingLogger, recordingLockLogger } from './transport-support';

// Two socket.io gateways over one Redis: @SubscribeMessage handlers exclude across them, and a client
// gets lock failures as an `exception` event it can act on.

const prefix = testPrefix();
let redis: Redis;
const ran = { busy: 0, badKey: 0 };
const lockLogs = recordingLockLogger();

@WebSocketGateway()
class CounterGateway {
  @SubscribeMessage('increment')
  @DistributedLock({ key: 'counter:{data.id}' })
  increment(@MessageBody() data: { id: string }): Promise<number> {
    return racyIncrement(redis, `${prefix}:count:${data.id}`);
  }

  @SubscribeMessage('busy')
  @DistributedLock({ key: 'held:{data.id}', waitTime: 0 })
  busy(): boolean {
    ran.busy++;
    return true;
  }

  @SubscribeMessage('item')
  @DistributedLock({ key: 'item:{data.id}' })
  item(): boolean {
    ran.badKey++;
    return true;
  }

  @SubscribeMessage('unavailable')
  @DistributedLock({
    key: () => {
      throw new RedisUnavailableError('down', 'lock', 3_000, undefined, '10.0.0.1:6379');
    },
  })
  unavailable(): boolean {
    return true;
  }

  @SubscribeMessage('bug')
  @DistributedLock({ key: 'bug' })
  bug(): boolean {
    throw new Error('a bug in the handler');
  }
}

@Module({
  imports: [RedisLockModule.forRoot(lockOptions(prefix, { logger: lockLogs }))],
  providers: [CounterGateway],
})
class AppModule {}

describe('@DistributedLock on @SubscribeMessage handlers (socket.io gateway, two instances)', () => {
  const apps: INestApplication[] = [];
  const sockets: Socket[] = [];
  const nestLogger = capturingLogger();

  beforeAll(async () => {
    redis = await connect();
    for (let i = 0; i < 2; i++) {
      const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
      const app = moduleRef.createNestApplication({ logger: nestLogger });
      apps.push(app);
      const socket = io(await listen(app), { transports: ['websocket'], reconnection: false });
      await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('connect_error', reject));
      sockets.push(socket);
    }
  });

  afterAll(async () => {
    sockets.forEach((socket) => socket.disconnect());
    await Promise.all(apps.map((app) => app.close()));
    await redis.quit();
    Logger.overrideLogger(false);
  });

  beforeEach(() => {
    nestLogger.error.mockClear();
    lockLogs.clear();
  });

  /** Emits and waits for the handler's acknowledgement (its result). */
  const call = (i: number, event: string, data: unknown) =>
    sockets[i].timeout(5_000).emitWithAck(event, data) as Promise<unknown>;

  /** Emits and waits for the `exception` event Nest sends when the handler fails. */
  const failure = (i: number, event: string, data: unknown) =>
    new Promise<Record<string, unknown>>((resolve) => {
      sockets[i].once('exception', resolve);
      sockets[i].emit(event, data);
    });

  it('serialises a racy handler across both instances', async () => {
    const results = await Promise.all(Array.from({ length: 24 }, (_, i) => call(i % 2, 'increment', { id: 'a' })));
    expect(await redis.get(`${prefix}:count:a`)).toBe('24');
    expect(results.map(Number).sort((x, y) => x - y)).toEqual(Array.from({ length: 24 }, (_, i) => i + 1));
  });

  it('answers a busy lock with LOCK_BUSY, the lock and retryAfterMs, without running the handler or logging an error', async () => {
    const held = gate();
    const entered = gate();
    const holding = apps[0].get(LockService).withLock('held:x', () => (entered.open(), held.promise));
    await entered.promise;
    try {
      const error = await failure(1, 'busy', { id: 'x' });
      expect(error).toEqual({
        status: 'error',
        code: 'LOCK_BUSY',
        error: 'LockAcquireTimeoutError',
        statusCode: 409,
        message: expect.stringContaining('held:x'),
        lock: 'held:x',
        retryAfterMs: expect.any(Number),
        pattern: 'busy',
      });
      expect(error.retryAfterMs).toBeGreaterThan(0);
    } finally {
      held.open();
      await holding;
    }
    expect(ran.busy).toBe(0);
    expect(nestLogger.error).not.toHaveBeenCalled();
    expect(lockLogs.lines.debug).toEqual([expect.stringContaining('CounterGateway.busy: LOCK_BUSY')]);
    expect(await call(1, 'busy', { id: 'x' })).toBe(true);
  });

  it('answers a missing key value with BAD_USER_INPUT, without running the handler or logging an error', async () => {
    const error = await failure(0, 'item', {});
    expect(error).toMatchObject({
      status: 'error',
      code: 'BAD_USER_INPUT',
      error: 'LockKeyError',
      statusCode: 400,
      placeholder: '{data.id}',
      pattern: 'item',
    });
    expect(ran.badKey).toBe(0);
    expect(nestLogger.error).not.toHaveBeenCalled();
    expect(lockLogs.lines.debug).toEqual([expect.stringContaining('CounterGateway.item: BAD_USER_INPUT')]);
  });

  it('answers Redis unavailable with LOCK_UNAVAILABLE, logged at warn', async () => {
    const error = await failure(0, 'unavailable', {});
    expect(error).toMatchObject({ status: 'error', code: 'LOCK_UNAVAILABLE', statusCode: 503 });
    expect(JSON.stringify(error)).not.toContain('10.0.0.1');
    expect(nestLogger.error).not.toHaveBeenCalled();
    expect(lockLogs.lines.warnings).toEqual([expect.stringContaining('10.0.0.1:6379')]);
  });

  it("leaves a handler's own error alone: Internal server error, logged as Nest's ERROR", async () => {
    const error = await failure(0, 'bug', {});
    expect(error).toMatchObject({ status: 'error', message: 'Internal server error' });
    expect(nestLogger.error).toHaveBeenCalledTimes(1);
  });
});
