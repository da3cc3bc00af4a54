import { Controller, Get, Injectable, Module, Param, type INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import request from 'supertest';
import { DistributedLock, LockService, RedisLockModule } from '../../lib';
import { eventually, testPrefix } from '../support/engine';
import { gate, holderElsewhere, listen, lockOptions, within } from './nest-support';

const prefix = testPrefix();
const state = { waiting: 0, ran: 0, proceed: gate() };

@Injectable()
class Stock {
  constructor(private readonly locks: LockService) {}

  @DistributedLock({ key: 'stock:{0}' }) // no waitTime: waits until the lock is free
  async reserve(_id: string): Promise<string> {
    state.ran++;
    return 'reserved';
  }

  /** Re-enters the lock its caller holds. */
  @DistributedLock({ key: 'order:{0}', waitTime: 0 })
  async recheck(_id: string): Promise<string> {
    return 'rechecked';
  }

  async reserveViaService(id: string): Promise<string> {
    return this.locks.withLock(`stock:${id}`, () => (state.ran++, 'reserved'));
  }
}

@Controller()
class OrderController {
  constructor(private readonly stock: Stock) {}

  @Get('order/:id')
  @DistributedLock({ key: 'order:{params.id}' })
  async order(@Param('id') id: string): Promise<string> {
    state.waiting++;
    return this.stock.reserve(id);
  }

  @Get('slow/:id')
  @DistributedLock({ key: 'order:{params.id}' })
  async slow(@Param('id') id: string): Promise<string> {
    state.waiting++;
    await state.proceed.promise;
    return this.stock.recheck(id);
  }

  @Get('slow-free/:id')
  @DistributedLock({ key: 'order:{params.id}' })
  async slowFree(@Param('id') id: string): Promise<string> {
    state.waiting++;
    await state.proceed.promise;
    return this.stock.reserve(id); // free: nobody else holds it
  }

  @Get('order-svc/:id')
  @DistributedLock({ key: 'order-svc:{params.id}' })
  async orderViaService(@Param('id') id: string): Promise<string> {
    state.waiting++;
    return this.stock.reserveViaService(id);
  }
}

@Module({
  imports: [RedisLockModule.forRoot(lockOptions(prefix, { shutdownTimeout: 1_000 }))],
  controllers: [OrderController],
  providers: [Stock],
})
class AppModule {}

/**
 * Closing the HTTP server waits for every request in flight, so the module ends a handler's wait for
 * its lock as closing starts (docs/nest.md, Shutdown). A locked handler that waits for a second lock,
 * through a decorated provider method or LockService, is the same request in flight: its wait went on
 * until the module's own shutdown hook, which Nest runs only after the HTTP server has closed, so
 * app.close() waited for the other holder, for ever if it never lets go.
 */
describe('review: app.close() while a locked handler waits for a nested lock held elsewhere', () => {
  const other = holderElsewhere(prefix);

  it.each([
    ['a decorated provider method', 'order'],
    ['LockService.withLock', 'order-svc'],
  ])(
    'through %s: close ends in bounded time, the request ends, the nested work never ran',
    async (_how, route) => {
      state.waiting = 0;
      state.ran = 0;
      const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
      const app: INestApplication = moduleRef.createNestApplication({ logger: false });
      const url = await listen(app);
      const held = await other().locks.getLock('stock:1').lock({ owner: 'elsewhere' });
      try {
        const response = request(url)
          .get(`/${route}/1`)
          .then(
            (res) => res.status,
            (error: Error) => error.message,
          );
        await eventually(() => state.waiting === 1);
        const closed = await within(
          app.close().then(() => 'closed'),
          15_000,
        );
        expect(closed).toBe('closed');
        // The nested call rejects with LockModuleClosedError; the handler does not catch it: its error (500).
        expect(await within(response, 5_000)).toBe(500);
        expect(state.ran).toBe(0);
      } finally {
        await held.release();
        await app.close();
      }
    },
    40_000,
  );

  it.each([
    ['re-enters its own lock (its request is waited for)', '/slow/2', 'rechecked'],
    ['takes a free second lock (no wait needed)', '/slow-free/3', 'reserved'],
  ])(
    'a locked handler still %s after closing started',
    async (_what, path, body) => {
      state.waiting = 0;
      state.proceed = gate();
      const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
      const app: INestApplication = moduleRef.createNestApplication({ logger: false });
      const url = await listen(app);
      try {
        const response = request(url)
          .get(path)
          .then((res) => [res.status, res.text]);
        await eventually(() => state.waiting === 1);
        const closing = app.close().then(() => 'closed');
        await new Promise((resolve) => setTimeout(resolve, 200)); // closing has started: handler waits end
        state.proceed.open();
        expect(await within(response, 5_000)).toEqual([200, body]);
        expect(await within(closing, 15_000)).toBe('closed');
      } finally {
        state.proceed.open();
        await app.close();
      }
    },
    40_000,
  );
});
