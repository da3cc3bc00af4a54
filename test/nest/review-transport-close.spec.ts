import type { AddressInfo, Server } from 'node:net';
import { Controller, Module, type INestApplication, type INestMicroservice } from '@nestjs/common';
import {
  ClientProxyFactory,
  MessagePattern,
  Payload,
  Server as TransportServer,
  Transport,
  type CustomTransportStrategy,
  type MicroserviceOptions,
} from '@nestjs/microservices';
import { MessageBody, SubscribeMessage, WebSocketGateway } from '@nestjs/websockets';
import { Test } from '@nestjs/testing';
import { lastValueFrom } from 'rxjs';
import { io } from 'socket.io-client';
import { DistributedLock, LockModuleClosedError, LockService, RedisLockModule } from '../../lib';
import { testPrefix } from '../support/engine';
import {
  holderElsewhere,
  listen,
  lockOptions,
  within,
  untilWaiting,
  expectOnlyElsewhereThenNothing,
} from './nest-support';
import { recordingLockLogger } from './transport-support';

const prefix = testPrefix();
const state = { ran: 0, errors: [] as unknown[] };
const lockLogs = recordingLockLogger();

/** The undecorated handler's lock: LockService with no waitTime (until the lock is free). */
async function reserve(locks: LockService, id: string): Promise<string> {
  try {
    return await locks.withLock(`stock:${id}`, () => (state.ran++, 'reserved'));
  } catch (error) {
    state.errors.push(error);
    throw error;
  }
}

@Controller()
class StockHandlers {
  constructor(private readonly locks: LockService) {}

  @MessagePattern('with-lock')
  withLock(@Payload() data: { id: string }): Promise<string> {
    return reserve(this.locks, data.id);
  }

  @MessagePattern('decorated')
  @DistributedLock({ key: 'stock:{data.id}' })
  decorated(): string {
    state.ran++;
    return 'reserved';
  }
}

@WebSocketGateway()
class StockGateway {
  constructor(private readonly locks: LockService) {}

  @SubscribeMessage('with-lock')
  withLock(@MessageBody() data: { id: string }): Promise<string> {
    return reserve(this.locks, data.id);
  }

  @SubscribeMessage('decorated')
  @DistributedLock({ key: 'stock:{data.id}' })
  decorated(): string {
    state.ran++;
    return 'reserved';
  }
}

const lockModule = RedisLockModule.forRoot(lockOptions(prefix, { shutdownTimeout: 1_000, logger: lockLogs }));

@Module({ imports: [lockModule], controllers: [StockHandlers] })
class MicroserviceModule {}

@Module({ imports: [lockModule], providers: [StockGateway] })
class GatewayModule {}

/** A transport's app with one caller: `send` resolves with the reply or what the caller got instead. */
interface Started {
  close(): Promise<void>;
  send(pattern: string, id: number): Promise<unknown>;
  stopCaller(): Promise<void>;
}

async function microservice(): Promise<Started> {
  const moduleRef = await Test.createTestingModule({ imports: [MicroserviceModule] }).compile();
  const app: INestMicroservice = moduleRef.createNestMicroservice({
    transport: Transport.TCP,
    options: { host: '127.0.0.1', port: 0 },
    logger: false,
  });
  await app.listen();
  const { port } = app.unwrap<Server>().address() as AddressInfo;
  return caller(() => app.close(), port);
}

/** A TCP caller of the microservice listening on `port`. */
async function caller(close: () => Promise<void>, port: number): Promise<Started> {
  const client = ClientProxyFactory.create({ transport: Transport.TCP, options: { host: '127.0.0.1', port } });
  await client.connect();
  return {
    close,
    send: (pattern, id) =>
      lastValueFrom(client.send<unknown>(pattern, { id: String(id) })).then(
        (value) => ({ reply: value }),
        (error: unknown) => ({ error }),
      ),
    stopCaller: () => client.close(),
  };
}

/** The same handlers over TCP, connected to an HTTP application (a hybrid app): closed after its hooks. */
async function hybridMicroservice(): Promise<Started> {
  const moduleRef = await Test.createTestingModule({ imports: [MicroserviceModule] }).compile();
  const app: INestApplication = moduleRef.createNestApplication({ logger: false });
  const microservice = app.connectMicroservice<MicroserviceOptions>({
    transport: Transport.TCP,
    options: { host: '127.0.0.1', port: 0 },
  });
  await app.startAllMicroservices();
  await app.init();
  const { port } = microservice.unwrap<Server>().address() as AddressInfo;
  return caller(() => app.close(), port);
}

async function gateway(): Promise<Started> {
  const moduleRef = await Test.createTestingModule({ imports: [GatewayModule] }).compile();
  const app: INestApplication = moduleRef.createNestApplication({ logger: false });
  const socket = io(await listen(app), { transports: ['websocket'], reconnection: false });
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('connect_error', reject));
  return {
    close: () => app.close(),
    send: (event, id) =>
      new Promise((resolve) => {
        socket.once('exception', (error: unknown) => resolve({ exception: error }));
        socket.once('disconnect', (reason: string) => resolve({ disconnected: reason }));
        socket.emit(event, { id: String(id) }, (reply: unknown) => resolve({ reply }));
      }),
    stopCaller: async () => void socket.disconnect(),
  };
}

/**
 * A message handler waiting for a lock held elsewhere must not hold app.close() (docs/nest.md,
 * Shutdown). Closing ends such a wait as it starts and lets the handler answer before Nest closes its
 * servers, so a socket.io client, and the caller of a microservice connected to an HTTP app, get the
 * handler's failure (LOCK_UNAVAILABLE for a decorated one) before their connection goes. A standalone
 * microservice's close destroys its TCP sockets before any lifecycle hook runs: its caller sees the
 * connection close. On the server the wait ends with the module's typed error.
 */
describe('review: app.close() while a message handler waits for a lock held elsewhere', () => {
  const other = holderElsewhere(prefix);
  let nextId = 0;

  it.each([
    [
      'microservice',
      '@DistributedLock',
      microservice,
      'decorated',
      { error: expect.objectContaining({ message: 'Connection closed' }) },
    ],
    [
      'microservice',
      'LockService.withLock',
      microservice,
      'with-lock',
      { error: expect.objectContaining({ message: 'Connection closed' }) },
    ],
    [
      'microservice connected to an HTTP app',
      '@DistributedLock',
      hybridMicroservice,
      'decorated',
      { error: expect.objectContaining({ code: 'LOCK_UNAVAILABLE', statusCode: 503 }) },
    ],
    [
      'microservice connected to an HTTP app',
      'LockService.withLock',
      hybridMicroservice,
      'with-lock',
      { error: expect.objectContaining({ status: 'error', message: 'Internal server error' }) },
    ],
    [
      'gateway',
      '@DistributedLock',
      gateway,
      'decorated',
      { exception: expect.objectContaining({ code: 'LOCK_UNAVAILABLE', statusCode: 503 }) },
    ],
    // The handler's own failure: LockModuleClosedError, which it does not map.
    [
      'gateway',
      'LockService.withLock',
      gateway,
      'with-lock',
      { exception: expect.objectContaining({ status: 'error', message: 'Internal server error' }) },
    ],
  ])(
    '%s, %s: close ends well within the drain bound, the handler never runs, nothing stays locked',
    async (transport, _how, start, pattern, callerSees) => {
      Object.assign(state, { ran: 0, errors: [] });
      lockLogs.clear();
      const id = ++nextId;
      const started = await start();
      const held = await other().locks.getLock(`stock:${id}`).lock({ owner: 'elsewhere' });
      try {
        const outcome = started.send(pattern, id);
        // It waits for the lock: its process is listed as a waiter.
        await untilWaiting(other(), `stock:${id}`);
        const closeStarted = Date.now();
        const closed = await within(
          started.close().then(() => 'closed'),
          20_000,
        );
        expect(closed).toBe('closed');
        expect(Date.now() - closeStarted).toBeLessThan(6_000); // shutdownTimeout 1 s, with room for a noisy machine
        expect(await within(outcome, 5_000)).toEqual(callerSees);
        expect(state.ran).toBe(0);
        if (pattern === 'with-lock') {
          expect(state.errors).toHaveLength(1);
          expect(state.errors[0]).toBeInstanceOf(LockModuleClosedError);
        } else if (transport === 'microservice') {
          // Mapped for a reply the closed socket no longer carries; logged as every transport's failure is.
          expect(lockLogs.lines.warnings).toEqual([
            expect.stringContaining('StockHandlers.decorated: LOCK_UNAVAILABLE'),
          ]);
        }
        // The wait ended, not the drain's bound: nothing was still running when it gave up.
        expect(lockLogs.lines.warnings.join('\n')).not.toContain('into shutdown');
        // Only the other holder's hold is there; once it lets go, nothing is.
        await expectOnlyElsewhereThenNothing(other(), prefix, `stock:${id}`, held);
      } finally {
        await held.release();
        await started.stopCaller();
        await started.close();
      }
    },
    40_000,
  );
});

/**
 * A transport whose close waits for the messages being handled, as a Kafka consumer's disconnect does:
 * `deliver` hands a message to its handler as the transport's consumer would.
 */
class DrainingTransport extends TransportServer implements CustomTransportStrategy {
  private readonly inFlight = new Set<Promise<unknown>>();

  listen(callback: () => void): void {
    callback();
  }

  async close(): Promise<void> {
    await Promise.allSettled([...this.inFlight]);
  }

  on(): void {}

  unwrap<T>(): T {
    return this as unknown as T;
  }

  deliver(pattern: string, data: unknown): Promise<unknown> {
    const handler = this.getHandlerByPattern(pattern);
    if (!handler) return Promise.reject(new Error(`no handler for ${pattern}`));
    const handled = Promise.resolve(handler(data)).then((result) => lastValueFrom(this.transformToObservable(result)));
    this.inFlight.add(handled);
    const done = () => this.inFlight.delete(handled);
    handled.then(done, done);
    return handled;
  }
}

/**
 * The module marks each microservice handler's call as a message in flight, as it marks HTTP requests:
 * without the mark, an undecorated handler's wait ended only at the module's own shutdown, which Nest
 * runs after closing the transports, and a transport that waits for its handlers never finished closing.
 * A hybrid application (an HTTP app with a connected microservice, not inheriting its config): a
 * standalone microservice's close() closes its transport before running any hook (docs/nest.md).
 */
describe('review: app.close() with a transport that waits for its handlers, one of them waiting in LockService', () => {
  const other = holderElsewhere(prefix);

  it('close ends, the wait ends with LockModuleClosedError, the handler never runs, nothing stays locked', async () => {
    Object.assign(state, { ran: 0, errors: [] });
    const transport = new DrainingTransport();
    const moduleRef = await Test.createTestingModule({ imports: [MicroserviceModule] }).compile();
    const app: INestApplication = moduleRef.createNestApplication({ logger: false });
    app.connectMicroservice({ strategy: transport });
    await app.startAllMicroservices();
    await app.init();
    const held = await other().locks.getLock('stock:draining').lock({ owner: 'elsewhere' });
    try {
      const outcome = transport.deliver('with-lock', { id: 'draining' }).then(
        (reply) => ({ reply }),
        (error: unknown) => ({ error }),
      );
      await untilWaiting(other(), 'stock:draining');
      const closeStarted = Date.now();
      expect(
        await within(
          app.close().then(() => 'closed'),
          20_000,
        ),
      ).toBe('closed');
      expect(Date.now() - closeStarted).toBeLessThan(6_000); // the other holder keeps its lock throughout
      // The transport's caller gets the handler's failure, as it would any other.
      expect(await within(outcome, 5_000)).toEqual({ error: expect.anything() });
      expect(state.ran).toBe(0);
      expect(state.errors).toHaveLength(1);
      expect(state.errors[0]).toBeInstanceOf(LockModuleClosedError);
      await expectOnlyElsewhereThenNothing(other(), prefix, 'stock:draining', held);
    } finally {
      await held.release();
      await app.close();
    }
  }, 40_000);
});
