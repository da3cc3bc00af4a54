/**
 * Unusual input through the Nest layer: keys over getters of a class (Passport users, ORM entities),
 * `onBusy: 'skip'` on a method returning an Observable, and withLock given something that is not a function.
 */
import { Controller, Get, Injectable, Module, type INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import type Redis from 'ioredis';
import { Observable, of } from 'rxjs';
import request from 'supertest';
import { DistributedLock, LockKeyError, LockOptionsError, LockService, RedisLockModule } from '../../lib';
import { connect, lockClient, testPrefix, type TestClient } from '../support/engine';
import { lockKey, lockOptions } from './nest-support';

const prefix = testPrefix();

/** A user as Passport strategies often return it: a class instance whose id is a getter. */
class User {
  constructor(private readonly raw: { id: string }) {}
  get id(): string {
    return this.raw.id;
  }
  describe(): string {
    return `user ${this.raw.id}`;
  }
}

/** An entity whose getter comes from its base class. */
class Admin extends User {}

const ran = { skipped: 0 };

@Injectable()
class Jobs {
  constructor(private readonly locks: LockService) {}

  @DistributedLock({ key: 'busy-obs', waitTime: 0, onBusy: 'skip' })
  busyObservable(): Observable<string> {
    ran.skipped++;
    return of('ran');
  }

  @DistributedLock({ key: 'entity:{0.id}' })
  async byEntity(_entity: User): Promise<string | undefined> {
    return this.locks.current()?.name;
  }

  @DistributedLock({ key: 'entity:{0.describe}' })
  async byMethod(_entity: User): Promise<string> {
    return 'ran';
  }

  @DistributedLock({ key: 'entity:{0.constructor}' })
  async byConstructor(_entity: User): Promise<string> {
    return 'ran';
  }
}

@Controller()
class MeController {
  constructor(private readonly locks: LockService) {}

  @Get('me')
  @DistributedLock({ key: 'user:{user.id}' })
  me(): string | undefined {
    return this.locks.current()?.name;
  }
}

@Module({
  imports: [RedisLockModule.forRoot(lockOptions(prefix))],
  controllers: [MeController],
  providers: [Jobs],
})
class AppModule {}

describe('unusual input through the Nest layer', () => {
  let app: INestApplication;
  let locks: LockService;
  let other: TestClient;
  let redis: Redis;

  beforeAll(async () => {
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
    app = moduleRef.createNestApplication({ logger: false });
    // An authenticated user, as a Passport guard attaches it.
    app.use((req: { user?: unknown }, _res: unknown, next: () => void) => {
      req.user = new User({ id: 'u1' });
      next();
    });
    await app.init();
    locks = app.get(LockService);
    other = lockClient({ keyPrefix: prefix });
    redis = connect();
  });

  afterAll(async () => {
    await app?.close();
    await other.close();
    await redis.quit();
  });

  it('withLock with work that is not a function: a LockOptionsError naming the lock, before any attempt', async () => {
    const free = await locks.withLock('not-fn', 'oops' as never).catch((e: unknown) => e);
    expect(free).toBeInstanceOf(LockOptionsError);
    expect(free).toMatchObject({ name: 'LockOptionsError', key: 'not-fn' });
    // Held elsewhere: no attempt is made (it would time out with waitTime 0), the work is refused first.
    const held = await other.locks.getLock('not-fn-held').lock({ owner: 'elsewhere', leaseTime: 10_000 });
    try {
      const busy = await locks.withLock('not-fn-held', 42 as never, { waitTime: 0 }).catch((e: unknown) => e);
      expect(busy).toMatchObject({ name: 'LockOptionsError', key: 'not-fn-held' });
    } finally {
      await held.release();
    }
    expect(await redis.exists(lockKey(prefix, 'not-fn'))).toBe(0);
  });

  it("onBusy: 'skip' on a method returning an Observable completes without running it while the lock is busy", async () => {
    const held = await other.locks.getLock('busy-obs').lock({ owner: 'elsewhere', leaseTime: 10_000 });
    try {
      const outcome = await new Promise<string>((resolve) =>
        app
          .get(Jobs)
          .busyObservable()
          .subscribe({
            next: (value) => resolve(`next ${value}`),
            error: (e: Error) => resolve(`error ${e.name}`),
            complete: () => resolve('completed'),
          }),
      );
      expect(outcome).toBe('completed');
      expect(ran.skipped).toBe(0);
    } finally {
      await held.release();
    }
    // Free: it runs.
    const values: string[] = [];
    await new Promise<void>((resolve, reject) =>
      app
        .get(Jobs)
        .busyObservable()
        .subscribe({ next: (v) => values.push(v), error: reject, complete: resolve }),
    );
    expect(values).toEqual(['ran']);
    expect(ran.skipped).toBe(1);
  });

  it("a key over a getter of the argument's class (or its base class) locks on the getter's value", async () => {
    expect(await app.get(Jobs).byEntity(new User({ id: 'e1' }))).toBe('entity:e1');
    expect(await app.get(Jobs).byEntity(new Admin({ id: 'e2' }))).toBe('entity:e2');
  });

  it("a key over a method or Object.prototype's properties is still missing: nothing is called or locked", async () => {
    await expect(app.get(Jobs).byMethod(new User({ id: 'e3' }))).rejects.toBeInstanceOf(LockKeyError);
    await expect(app.get(Jobs).byConstructor(new User({ id: 'e4' }))).rejects.toBeInstanceOf(LockKeyError);
  });

  it('HTTP {user.id} with a class-instance user locks on its id', async () => {
    const response = await request(app.getHttpServer()).get('/me');
    expect([response.status, response.text]).toEqual([200, 'user:u1']);
  });
});
