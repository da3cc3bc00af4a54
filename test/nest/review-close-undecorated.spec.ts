import http from 'node:http';
import { Body, Controller, Get, Module, Param, Post, type INestApplication } from '@nestjs/common';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { Test } from '@nestjs/testing';
import request from 'supertest';
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

const prefix = testPrefix();
const state = { ran: 0, errors: [] as unknown[] };

/** No @DistributedLock: the handlers lock through LockService, with no waitTime (until the lock is free). */
@Controller()
class StockController {
  constructor(private readonly locks: LockService) {}

  @Get('with-lock/:id')
  async withLock(@Param('id') id: string): Promise<string> {
    try {
      return await this.locks.withLock(`stock:${id}`, () => (state.ran++, 'reserved'));
    } catch (error) {
      state.errors.push(error);
      throw error;
    }
  }

  @Get('lock/:id')
  async lock(@Param('id') id: string): Promise<string> {
    try {
      const handle = await this.locks.lock(`stock:${id}`);
      state.ran++;
      await handle.release();
      return 'reserved';
    } catch (error) {
      state.errors.push(error);
      throw error;
    }
  }

  /** Its body arrives in parts, after the middleware ran: the handler runs from the body parser's callback. */
  @Post('body/:id')
  async body(@Param('id') id: string, @Body() body: { item: string }): Promise<string> {
    try {
      return await this.locks.withLock(`stock:${id}`, () => (state.ran++, body.item));
    } catch (error) {
      state.errors.push(error);
      throw error;
    }
  }

  @Get('decorated/:id')
  @DistributedLock({ key: 'stock:{params.id}' })
  decorated(): string {
    state.ran++;
    return 'reserved';
  }
}

@Module({
  imports: [RedisLockModule.forRoot(lockOptions(prefix, { shutdownTimeout: 1_000 }))],
  controllers: [StockController],
})
class AppModule {}

/** A POST whose JSON body arrives in three writes 150 ms apart; resolves to the response's status. */
function slowPost(url: string, path: string): Promise<number> {
  const body = JSON.stringify({ item: 'reserved', padding: 'x'.repeat(4_000) });
  const req = http.request(`${url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
  });
  req.write(body.slice(0, 100));
  setTimeout(() => req.write(body.slice(100, 2_000)), 150);
  setTimeout(() => req.end(body.slice(2_000)), 300);
  return new Promise((resolve, reject) => {
    req.on('response', (res) => (res.resume(), resolve(res.statusCode ?? 0)));
    req.on('error', reject);
  });
}

/**
 * Closing the HTTP server waits for every request in flight, so a request's wait for a lock held
 * elsewhere must end as closing starts (docs/nest.md, Shutdown). An undecorated handler that locks
 * through LockService was not known as a request in flight: its wait went on until the module's own
 * shutdown hook, which Nest runs only after the HTTP server has closed, so app.close() waited for the
 * other holder, for ever if it never lets go. A decorated handler got 503 at once.
 */
describe.each(['express', 'fastify'])(
  'review: app.close() while an undecorated handler waits in LockService (%s)',
  (platform) => {
    const other = holderElsewhere(prefix);

    it.each([
      ['withLock', 'with-lock', 1, 500],
      ['lock', 'lock', 2, 500],
      ['withLock, a POST whose body arrives in parts', 'body', 4, 500],
      ['a decorated handler (for comparison)', 'decorated', 3, 503],
    ])(
      '%s: close ends within the drain bound, the wait ends with LockModuleClosedError, nothing stays locked',
      async (_how, route, id, status) => {
        Object.assign(state, { ran: 0, errors: [] });
        const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
        const app: INestApplication =
          platform === 'fastify'
            ? moduleRef.createNestApplication(new FastifyAdapter(), { logger: false })
            : moduleRef.createNestApplication({ logger: false });
        const url = await listen(app);
        const held = await other().locks.getLock(`stock:${id}`).lock({ owner: 'elsewhere' });
        try {
          const response =
            route === 'body'
              ? slowPost(url, `/body/${id}`)
              : request(url)
                  .get(`/${route}/${id}`)
                  .then(
                    (res) => res.status,
                    (error: Error) => error.message,
                  );
          // It waits for the lock: its process is listed as a waiter.
          await untilWaiting(other(), `stock:${id}`);
          const started = Date.now();
          const closed = await within(
            app.close().then(() => 'closed'),
            15_000,
          );
          expect(closed).toBe('closed');
          expect(Date.now() - started).toBeLessThan(6_000); // shutdownTimeout 1 s, with room for a noisy machine
          expect(await within(response, 5_000)).toBe(status);
          expect(state.ran).toBe(0);
          if (route !== 'decorated') {
            expect(state.errors).toHaveLength(1);
            expect(state.errors[0]).toBeInstanceOf(LockModuleClosedError);
          }
          // Only the other holder's hold is there; once it lets go, nothing is.
          await expectOnlyElsewhereThenNothing(other(), prefix, `stock:${id}`, held);
        } finally {
          await held.release();
          await app.close();
        }
      },
      40_000,
    );
  },
);

describe('review: app.close() and an app only init()ed', () => {
  const other = holderElsewhere(prefix);

  it('an app only init()ed, as supertest drives it, still waits after a request: closing its server is no shutdown', async () => {
    Object.assign(state, { ran: 0, errors: [] });
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
    const app: INestApplication = await moduleRef.createNestApplication({ logger: false }).init();
    try {
      // supertest listens on the server for the request, then closes it.
      await request(app.getHttpServer()).get('/with-lock/9').expect(200);
      const held = await other().locks.getLock('stock:9').lock({ owner: 'elsewhere' });
      setTimeout(() => void held.release(), 300);
      await request(app.getHttpServer()).get('/with-lock/9').expect(200);
      expect(state.ran).toBe(2);
      expect(state.errors).toEqual([]);
    } finally {
      await app.close();
    }
  }, 40_000);
});
