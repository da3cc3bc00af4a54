import { Catch, Module, UseFilters, type ArgumentsHost, type INestApplication } from '@nestjs/common';
import {
  BaseWsExceptionFilter,
  MessageBody,
  SubscribeMessage,
  WebSocketGateway,
  WsException,
} from '@nestjs/websockets';
import { WsAdapter } from '@nestjs/platform-ws';
import { Test } from '@nestjs/testing';
import type Redis from 'ioredis';
import WebSocket from 'ws';
import { DistributedLock, RedisLockModule } from '../../lib';
import { connect, testPrefix } from '../support/engine';
import {
  holderElsewhere,
  listen,
  lockOptions,
  racyIncrement,
  within,
  untilWaiting,
  expectOnlyElsewhereThenNothing,
} from './nest-support';

// The same gateway over @nestjs/platform-ws (plain WebSockets) instead of socket.io. Nest's default
// exception filter there only emits on the server's socket object, which sends nothing to the peer, so
// this app uses the usual recipe: a filter that sends the error as a message ({ event: 'exception' }).

const prefix = testPrefix();
let redis: Redis;
const ran = { busy: 0, waiting: 0 };

/** Sends a failure to the client, as a plain WebSocket app must do itself. */
@Catch()
class SendExceptions extends BaseWsExceptionFilter {
  override catch(exception: unknown, host: ArgumentsHost): void {
    const data =
      exception instanceof WsException ? exception.getError() : { status: 'error', message: 'Internal server error' };
    host
      .switchToWs()
      .getClient<WebSocket>()
      .send(JSON.stringify({ event: 'exception', data }));
  }
}

@WebSocketGateway()
@UseFilters(SendExceptions)
class CounterGateway {
  @SubscribeMessage('increment')
  @DistributedLock({ key: 'counter:{data.id}' })
  async increment(@MessageBody() data: { id: string }): Promise<{ event: string; data: number }> {
    return { event: 'incremented', data: await racyIncrement(redis, `${prefix}:count:${data.id}`) };
  }

  @SubscribeMessage('busy')
  @DistributedLock({ key: 'held:{data.id}', waitTime: 0 })
  busy(): { event: string; data: boolean } {
    ran.busy++;
    return { event: 'done', data: true };
  }

  /** No waitTime: until the lock is free, or the application closes. */
  @SubscribeMessage('waiting')
  @DistributedLock({ key: 'held:{data.id}' })
  waiting(): { event: string; data: boolean } {
    ran.waiting++;
    return { event: 'done', data: true };
  }
}

@Module({ imports: [RedisLockModule.forRoot(lockOptions(prefix))], providers: [CounterGateway] })
class AppModule {}

async function startApp(): Promise<{ app: INestApplication; url: string }> {
  const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
  const app = moduleRef.createNestApplication({ logger: false });
  app.useWebSocketAdapter(new WsAdapter(app));
  const url = (await listen(app)).replace(/^http/, 'ws');
  return { app, url };
}

/** A client: `next(event)` resolves with the data of the next message of that event. */
async function client(url: string): Promise<{
  socket: WebSocket;
  send(event: string, data: unknown): void;
  next(event: string): Promise<unknown>;
  closed: Promise<void>;
}> {
  const socket = new WebSocket(url);
  await new Promise<void>((resolve, reject) => socket.once('open', resolve).once('error', reject));
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  const waiting = new Map<string, ((data: unknown) => void)[]>();
  socket.on('message', (raw: WebSocket.RawData) => {
    const { event, data } = JSON.parse(raw.toString()) as { event: string; data: unknown };
    waiting.get(event)?.shift()?.(data);
  });
  return {
    socket,
    send: (event, data) => socket.send(JSON.stringify({ event, data })),
    next: (event) =>
      new Promise((resolve) => {
        const list = waiting.get(event) ?? [];
        list.push(resolve);
        waiting.set(event, list);
      }),
    closed,
  };
}

describe('@DistributedLock on @SubscribeMessage handlers over @nestjs/platform-ws', () => {
  const other = holderElsewhere(prefix);
  const apps: INestApplication[] = [];
  const urls: string[] = [];

  beforeAll(async () => {
    redis = await connect();
    for (let i = 0; i < 2; i++) {
      const { app, url } = await startApp();
      apps.push(app);
      urls.push(url);
    }
  });

  afterAll(async () => {
    await Promise.all(apps.map((app) => app.close()));
    await redis.quit();
  });

  it('serialises a racy handler across two instances', async () => {
    const clients = await Promise.all(urls.map((url) => client(url)));
    try {
      const replies = clients.flatMap((c) =>
        Array.from({ length: 10 }, () => {
          const reply = c.next('incremented');
          c.send('increment', { id: 'a' });
          return reply;
        }),
      );
      const counts = (await within(Promise.all(replies), 20_000)) as number[];
      expect([...counts].sort((x, y) => x - y)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
      expect(await redis.get(`${prefix}:count:a`)).toBe('20');
    } finally {
      clients.forEach((c) => c.socket.close());
    }
  }, 30_000);

  it('answers a busy lock with LOCK_BUSY, the lock and retryAfterMs, without running the handler', async () => {
    const c = await client(urls[0]);
    const held = await other().locks.getLock('held:b').lock({ owner: 'elsewhere' });
    try {
      ran.busy = 0;
      const failure = c.next('exception');
      c.send('busy', { id: 'b' });
      expect(await within(failure, 5_000)).toMatchObject({
        status: 'error',
        code: 'LOCK_BUSY',
        lock: 'held:b',
        retryAfterMs: expect.any(Number),
      });
      expect(ran.busy).toBe(0);
    } finally {
      await held.release();
      c.socket.close();
    }
  });

  it('app.close() while a handler waits: close is bounded, the client hears LOCK_UNAVAILABLE, nothing stays locked', async () => {
    const { app, url } = await startApp();
    const c = await client(url);
    const held = await other().locks.getLock('held:c').lock({ owner: 'elsewhere' });
    try {
      ran.waiting = 0;
      const failure = c.next('exception');
      c.send('waiting', { id: 'c' });
      await untilWaiting(other(), 'held:c');
      const heard: string[] = [];
      void failure.then(() => heard.push('exception'));
      void c.closed.then(() => heard.push('connection closed'));
      const started = Date.now();
      expect(
        await within(
          app.close().then(() => 'closed'),
          20_000,
        ),
      ).toBe('closed');
      expect(Date.now() - started).toBeLessThan(6_000); // the other holder keeps its lock throughout
      expect(await within(failure, 5_000)).toMatchObject({ code: 'LOCK_UNAVAILABLE', statusCode: 503 });
      await within(c.closed, 5_000);
      // The answer came before the server closed the connection.
      expect(heard).toEqual(['exception', 'connection closed']);
      expect(ran.waiting).toBe(0);
      await expectOnlyElsewhereThenNothing(other(), prefix, 'held:c', held);
    } finally {
      await held.release();
      c.socket.close();
      await app.close();
    }
  }, 40_000);
});
