import { Controller, Get, Injectable, Module, Param, type INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import type Redis from 'ioredis';
import request from 'supertest';
import { DistributedLock, LockService, RedisLockModule } from '../../lib';
import { connect, sleep, testPrefix } from '../support/engine';
import { lockKey, lockOptions } from './nest-support';

const prefix = testPrefix();

/** How many of the bodies run at once, at most. */
let active = 0;
let most = 0;
async function body(): Promise<void> {
  most = Math.max(most, ++active);
  await sleep(100);
  active--;
}

@Injectable()
class Ledger {
  constructor(private readonly locks: LockService) {}

  /** Takes B, then asks for A again (its caller holds A): it must re-enter A, not wait for its own caller. */
  @DistributedLock({ key: 'ledger-b:{0}', waitTime: 2_000 })
  async post(id: string): Promise<string> {
    return this.locks.withLock(`ledger-a:${id}`, () => 'inner A re-entered', { waitTime: 0 });
  }
}

@Controller()
class LedgerController {
  constructor(private readonly ledger: Ledger) {}

  @Get('ledger/:id')
  @DistributedLock({ key: 'ledger-a:{params.id}', waitTime: 2_000 })
  async settle(@Param('id') id: string): Promise<string> {
    return this.ledger.post(id);
  }
}

@Module({
  imports: [RedisLockModule.forRoot(lockOptions(prefix))],
  controllers: [LedgerController],
  providers: [Ledger],
})
class AppModule {}

/**
 * As a Redisson thread that holds A, takes B and asks for A again re-enters A, so does a call chain
 * of the Nest layer (the engine's own withLock does: test/engine/belief.spec.ts). A section opened
 * inside another used to get a scope with no tie to the outer one, and the inner A waited for its
 * own holder: until its waitTime, or for ever without one.
 */
describe('review: nested sections of the Nest layer (A, then B, then A again)', () => {
  let app: INestApplication;
  let locks: LockService;
  let redis: Redis;
  const exists = async (name: string) => (await redis.exists(lockKey(prefix, name))) === 1;

  beforeAll(async () => {
    redis = connect();
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
    app = moduleRef.createNestApplication({ logger: false });
    await app.init();
    locks = app.get(LockService);
  });
  beforeEach(() => {
    active = 0;
    most = 0;
  });
  afterAll(async () => {
    await app?.close();
    await redis.quit();
  });

  it('LockService.withLock: A, then B, then A again re-enters A', async () => {
    const result = await locks.withLock('svc-a', () =>
      locks.withLock('svc-b', () => locks.withLock('svc-a', () => 'inner A re-entered', { waitTime: 0 }), {
        waitTime: 2_000,
      }),
    );
    expect(result).toBe('inner A re-entered');
    expect(await exists('svc-a')).toBe(false);
    expect(await exists('svc-b')).toBe(false);
  });

  it('a decorated handler holding A calls a decorated method taking B, which asks for A again', async () => {
    const response = await request(app.getHttpServer()).get('/ledger/1').expect(200);
    expect(response.text).toBe('inner A re-entered');
    expect(await exists('ledger-a:1')).toBe(false);
    expect(await exists('ledger-b:1')).toBe(false);
  });

  it('inside a holder of A, sibling branches still exclude each other on B (and re-enter A)', async () => {
    await locks.withLock('sib-a', () =>
      Promise.all([
        locks.withLock('sib-b', () => locks.withLock('sib-a', () => body(), { waitTime: 0 })),
        locks.withLock('sib-b', () => body()),
      ]),
    );
    expect(most).toBe(1);
    expect(await exists('sib-a')).toBe(false);
    expect(await exists('sib-b')).toBe(false);
  });

  it('inside a holder of A, a permit section asking for A again re-enters A; permits stay apart', async () => {
    await locks.withLock('perm-a', () =>
      Promise.all([
        locks.withLock('perm-s', () => locks.withLock('perm-a', () => body(), { waitTime: 0 }), { permits: 1 }),
        locks.withLock('perm-s', () => body(), { permits: 1 }),
      ]),
    );
    expect(most).toBe(1);
    expect(await exists('perm-a')).toBe(false);
  });
});
