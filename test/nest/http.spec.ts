import {
  Body,
  CanActivate,
  Controller,
  ExecutionContext,
  Get,
  Header,
  HttpCode,
  HttpException,
  Injectable,
  Module,
  Param,
  Post,
  SetMetadata,
  UseGuards,
  type INestApplication,
} from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { Test } from '@nestjs/testing';
import Redis from 'ioredis';
import request from 'supertest';
import {
  CurrentLock,
  DistributedLock,
  LockService,
  RedisLockModule,
  RedisRefusedError,
  RedisUnavailableError,
  type ActiveLock,
} from '../../lib';
import { connect, singlePort, sleep, testPrefix } from '../support/engine';
import { gate, listen, lockKey, lockOptions, racyIncrement } from './nest-support';

const prefix = testPrefix();
let redis: Redis;

@Injectable()
class DocumentService {
  constructor(private readonly locks: LockService) {}

  /** Locks the same key as the route: must re-enter, not wait (waitTime 0 would fail at once). */
  @DistributedLock({ key: 'doc:{0}', waitTime: 0 })
  async save(id: string): Promise<number> {
    return this.locks.withLock(`doc:${id}`, () => this.locks.reentrant(`doc:${id}`).getHoldCount(), { waitTime: 0 });
  }
}

const ROLES = 'test:roles';

@Injectable()
class RolesGuard implements CanActivate {
  constructor(private readonly reflector: Reflector) {}
  canActivate(context: ExecutionContext): boolean {
    const roles = this.reflector.get<string[]>(ROLES, context.getHandler());
    return roles?.includes(String(context.switchToHttp().getRequest().headers['x-role'])) ?? false;
  }
}

const handlerGate = { current: gate() };

@Controller()
class TestController {
  constructor(
    private readonly documents: DocumentService,
    private readonly locks: LockService,
  ) {}

  @Post('counters/:id/increment')
  @DistributedLock({ key: 'counter:{params.id}' })
  increment(@Param('id') id: string) {
    return racyIncrement(redis, `${prefix}:count:${id}`);
  }

  @Post('unlocked/:id/increment')
  incrementUnlocked(@Param('id') id: string) {
    return racyIncrement(redis, `${prefix}:count:${id}`);
  }

  @Post('docs/:id')
  @DistributedLock({ key: 'doc:{params.id}' })
  async saveDocument(@Param('id') id: string) {
    return { holds: await this.documents.save(id) };
  }

  @Get('search')
  @DistributedLock({ key: 'search:{query.id}' })
  search() {
    return 'found';
  }

  @Post('body')
  @DistributedLock({ key: 'order:{body.order.id}:{headers.X-Tenant}' })
  bodyKey(@Body() body: unknown) {
    return { name: this.locks.current()?.name, body };
  }

  @Get('slow/:id')
  @DistributedLock({ key: 'slow:{params.id}', waitTime: 100 })
  slow() {
    return 'ran';
  }

  @Get('report/:id')
  @DistributedLock({ key: 'report:{params.id}', waitTime: 100 })
  async report() {
    await sleep(1_200);
    return 'built';
  }

  @Get('teapot/:id')
  @DistributedLock({ key: 'teapot:{params.id}' })
  teapot() {
    throw new HttpException({ custom: 'body', short: 'and stout' }, 418);
  }

  @Get('articles/:id')
  @DistributedLock({ key: 'article:{params.id}' })
  async article(@Param('id') id: string, @CurrentLock() lock: ActiveLock) {
    const current = this.locks.current();
    await handlerGate.current.promise;
    return {
      id,
      name: lock.name,
      kind: lock.kind,
      fencingToken: lock.fencingToken,
      aborted: lock.signal.aborted,
      sameAsCurrent: current?.fencingToken === lock.fencingToken && current?.name === lock.name,
      // The lock's key alone: its fencing counter and its record of holds by id (lua/include/hold-ids.lua)
      // are companions under the same hash tag.
      keys: (await redis.keys(`${prefix}:{article:*`)).filter((key) => !/:(fence|grants)$/.test(key)),
    };
  }

  @Get('fn/:id')
  @DistributedLock({ key: (context: ExecutionContext) => `fn:${context.switchToHttp().getRequest().params.id}` })
  fnKey() {
    return this.locks.current()?.name;
  }

  // Our decorator above the route decorators, then below them: both keep every other metadata.
  @DistributedLock({ key: 'meta-above:{params.id}' })
  @Post('meta-above/:id')
  @HttpCode(202)
  @Header('X-Test', 'above')
  @SetMetadata(ROLES, ['admin'])
  @UseGuards(RolesGuard)
  metaAbove() {
    return this.locks.current()?.name;
  }

  @Post('meta-below/:id')
  @HttpCode(202)
  @Header('X-Test', 'below')
  @SetMetadata(ROLES, ['admin'])
  @UseGuards(RolesGuard)
  @DistributedLock({ key: 'meta-below:{params.id}' })
  metaBelow() {
    return this.locks.current()?.name;
  }
}

@DistributedLock({ key: 'class:{params.id}', waitTime: 0 })
@Controller('class')
class ClassLockedController {
  constructor(private readonly locks: LockService) {}

  @Get(':id')
  async get(@Param('id') id: string) {
    if (id === 'c1') await handlerGate.current.promise;
    return { name: this.locks.current()?.name };
  }

  @Get(':id/own')
  @DistributedLock({ key: 'own:{params.id}' })
  own() {
    return this.locks.current()?.name;
  }
}

@Module({
  imports: [RedisLockModule.forRoot(lockOptions(prefix, { waitTime: 10_000 }))],
  controllers: [TestController, ClassLockedController],
  providers: [DocumentService, RolesGuard],
})
class AppModule {}

describe('@DistributedLock on HTTP routes', () => {
  let app: INestApplication;
  let locks: LockService;

  beforeAll(async () => {
    redis = connect();
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
    app = moduleRef.createNestApplication({ logger: false });
    await listen(app);
    locks = app.get(LockService);
  });

  afterAll(async () => {
    await app?.close();
    await redis.quit();
  });

  beforeEach(() => {
    handlerGate.current = gate();
    handlerGate.current.open();
  });

  it('serialises 100 concurrent requests on a racy GET-then-SET counter', async () => {
    const server = app.getHttpServer();
    const unlocked = await Promise.all(
      Array.from({ length: 100 }, () => request(server).post('/unlocked/u1/increment').expect(201)),
    );
    expect(unlocked).toHaveLength(100);
    // The control: without the lock, updates get lost.
    expect(Number(await redis.get(`${prefix}:count:u1`))).toBeLessThan(100);

    const responses = await Promise.all(
      Array.from({ length: 100 }, () => request(server).post('/counters/c1/increment').expect(201)),
    );
    expect(Number(await redis.get(`${prefix}:count:c1`))).toBe(100);
    expect(responses.map((r) => Number(r.text)).sort((a, b) => a - b)).toEqual(
      Array.from({ length: 100 }, (_, i) => i + 1),
    );
    expect(await redis.exists(lockKey(prefix, 'counter:c1'))).toBe(0);
  });

  it('lets a service called by the handler re-enter the same lock instead of deadlocking', async () => {
    const response = await request(app.getHttpServer()).post('/docs/d1').expect(201);
    // route + decorated service method + withLock: three holds of one owner
    expect(response.body).toEqual({ holds: 3 });
    expect(await redis.exists(lockKey(prefix, 'doc:d1'))).toBe(0);
  });

  it('answers 400 for a missing, empty or non-scalar key value and takes no lock', async () => {
    const server = app.getHttpServer();
    const missing = await request(server).get('/search').expect(400);
    expect(missing.body.message).toContain('{query.id}');
    await request(server).get('/search?id=').expect(400);
    await request(server).get('/search?id=1&id=2').expect(400);
    await request(server).post('/body').set('X-Tenant', 't1').send({ order: {} }).expect(400);
    await request(server)
      .post('/body')
      .send({ order: { id: 7 } })
      .expect(400); // no X-Tenant header
    expect(await redis.keys(`${prefix}:{search:*`)).toEqual([]);
    expect(await redis.keys(`${prefix}:{order:*`)).toEqual([]);
    expect(await redis.keys(`${prefix}:*undefined*`)).toEqual([]);

    await request(server).get('/search?id=42').expect(200, 'found');
    const ok = await request(server)
      .post('/body')
      .set('X-Tenant', 't1')
      .send({ order: { id: 7 } })
      .expect(201);
    expect(ok.body.name).toBe('order:7:t1');
  });

  it('answers 409 with Retry-After when the lock stays held for the whole waitTime', async () => {
    const held = await locks.lock('slow:1', { leaseTime: 4_000 });
    try {
      const started = Date.now();
      const response = await request(app.getHttpServer()).get('/slow/1').expect(409);
      expect(Date.now() - started).toBeGreaterThanOrEqual(90);
      expect(response.body).toEqual({
        statusCode: 409,
        error: 'Conflict',
        message: expect.stringContaining('locked by another request'),
      });
      const retryAfter = Number(response.headers['retry-after']);
      expect(retryAfter).toBeGreaterThanOrEqual(1);
      expect(retryAfter).toBeLessThanOrEqual(4);
      expect(JSON.stringify(response.body)).not.toContain('slow:1'); // the lock name stays on the server
    } finally {
      await held.release();
    }
    await request(app.getHttpServer()).get('/slow/1').expect(200, 'ran');
  });

  it('Retry-After reflects how long the handler holds its lock, not the 30 s watchdog lease of the holder', async () => {
    await request(app.getHttpServer()).get('/report/1').expect(200, 'built'); // one hold of ~1.2 s seen
    const held = await locks.lock('report:1'); // watchdog lease: PTTL ~30 s
    try {
      const response = await request(app.getHttpServer()).get('/report/1').expect(409);
      const retryAfter = Number(response.headers['retry-after']);
      expect(retryAfter).toBeGreaterThanOrEqual(1);
      expect(retryAfter).toBeLessThanOrEqual(5);
    } finally {
      await held.release();
    }
  });

  it("passes the handler's own HttpException through unchanged and releases the lock", async () => {
    const response = await request(app.getHttpServer()).get('/teapot/1').expect(418);
    expect(response.body).toEqual({ custom: 'body', short: 'and stout' });
    expect(await redis.exists(lockKey(prefix, 'teapot:1'))).toBe(0);
  });

  it('gives the handler the lock (CurrentLock and LockService.current) with a growing fencing token', async () => {
    const first = await request(app.getHttpServer()).get('/articles/a1').expect(200);
    const second = await request(app.getHttpServer()).get('/articles/a1').expect(200);
    expect(first.body).toMatchObject({ id: 'a1', name: 'article:a1', kind: 'reentrant', aborted: false });
    expect(first.body.sameAsCurrent).toBe(true);
    expect(second.body.fencingToken).toBeGreaterThan(first.body.fencingToken);
  });

  it('keeps request values inside the hash tag: braces in a param are encoded in the Redis key', async () => {
    for (const id of ['a}b', 'x{y', '}{', '%7D']) {
      const response = await request(app.getHttpServer())
        .get(`/articles/${encodeURIComponent(id)}`)
        .expect(200);
      expect(response.body.name).toBe(`article:${id}`);
      // The only key while the handler ran: the whole name inside one {…} hash tag.
      expect(response.body.keys).toEqual([lockKey(prefix, `article:${id}`)]);
      expect(response.body.keys[0]).toMatch(new RegExp(`^${prefix}:\\{article:[^{}]*\\}$`));
    }
  });

  it('accepts a key function of the ExecutionContext', async () => {
    await request(app.getHttpServer()).get('/fn/9').expect(200, 'fn:9');
  });

  it('keeps routes, status codes, headers, guards and their metadata working, above or below', async () => {
    const server = app.getHttpServer();
    for (const where of ['above', 'below']) {
      const response = await request(server).post(`/meta-${where}/1`).set('X-Role', 'admin').expect(202);
      expect(response.text).toBe(`meta-${where}:1`);
      expect(response.headers['x-test']).toBe(where);
      await request(server).post(`/meta-${where}/1`).set('X-Role', 'guest').expect(403);
    }
  });

  it('locks every handler of a class-level decorated controller; a method decorator overrides it', async () => {
    handlerGate.current = gate();
    const server = app.getHttpServer();
    const first = request(server)
      .get('/class/c1')
      .then((r) => r);
    await waitForKey(lockKey(prefix, 'class:c1'));
    // waitTime 0 from the class decorator: a second request on the same id is refused at once.
    await request(server).get('/class/c1').expect(409);
    await request(server).get('/class/c2').expect(200, { name: 'class:c2' }); // another lock
    handlerGate.current.open();
    expect((await first).body).toEqual({ name: 'class:c1' });
    await request(server).get('/class/c1/own').expect(200, 'own:c1');
  });

  /** An application like `app`, its locks on `client`: for what Redis does wrong. */
  async function appOver(client: Redis): Promise<INestApplication> {
    const moduleRef = await Test.createTestingModule({
      imports: [RedisLockModule.forRoot(lockOptions(prefix, { connection: { type: 'client', client } }))],
      controllers: [TestController],
      providers: [DocumentService, RolesGuard],
    }).compile();
    const other = moduleRef.createNestApplication({ logger: false });
    await other.init();
    return other;
  }

  /** Asserts that a locked route answers 503, and returns the error LockService.lock() meets meanwhile. */
  async function unavailable(other: INestApplication): Promise<unknown> {
    const response = await request(other.getHttpServer()).get('/search?id=1').expect(503);
    expect(response.body.message).toContain('unavailable');
    return other
      .get(LockService)
      .lock('x')
      .catch((e: unknown) => e);
  }

  it('answers 503 when Redis is unreachable, and gives the typed error as the cause', async () => {
    const client = new Redis({ host: '127.0.0.1', port: singlePort(), enableOfflineQueue: false });
    const other = await appOver(client);
    try {
      client.disconnect();
      expect(await unavailable(other)).toBeInstanceOf(RedisUnavailableError);
    } finally {
      await other.close();
    }
  });

  it('answers 503 when Redis refuses (a user without permission to run scripts), with the typed error as the cause', async () => {
    const user = `no-scripts-${prefix.slice(-8)}`;
    await redis.call('ACL', 'SETUSER', user, 'on', '>x', '~*', '&*', '+@all', '-evalsha', '-eval', '-script');
    const client = new Redis({ host: '127.0.0.1', port: singlePort(), username: user, password: 'x' });
    try {
      const other = await appOver(client);
      try {
        const error = await unavailable(other);
        expect(error).toBeInstanceOf(RedisRefusedError);
        expect((error as RedisRefusedError).code).toBe('NOPERM');
      } finally {
        await other.close();
      }
    } finally {
      client.disconnect();
      await redis.call('ACL', 'DELUSER', user);
    }
  });
});

async function waitForKey(key: string, present = true): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (((await redis.exists(key)) === 1) !== present) {
    if (Date.now() > deadline) throw new Error(`key ${key} did not ${present ? 'appear' : 'disappear'}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
