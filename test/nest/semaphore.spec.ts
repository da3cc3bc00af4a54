import { Controller, Param, Post, type INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import request from 'supertest';
import {
  CurrentLock,
  DistributedLock,
  LockOptionsError,
  LockService,
  RedisLockModule,
  type ActiveLock,
} from '../../lib';
import { compileLockSpec } from '../../lib/internal';
import { eventually, sleep, testPrefix } from '../support/engine';
import { gate, lockOptions } from './nest-support';

const calls = { inside: 0, maxInside: 0 };
let hold = gate();

@Controller('charges')
class ChargesController {
  @Post()
  @DistributedLock({ key: 'payment-provider', permits: 3 })
  async charge(@CurrentLock() lock: ActiveLock) {
    calls.maxInside = Math.max(calls.maxInside, ++calls.inside);
    // Stay until three calls have been inside together (or 3 s pass), so that "really that many" does not depend
    // on the requests arriving close enough together on a loaded machine; with fewer permits the wait runs out.
    for (const until = Date.now() + 3_000; calls.maxInside < 3 && Date.now() < until;) await sleep(5);
    await sleep(20);
    calls.inside--;
    return { kind: lock.kind, token: lock.fencingToken };
  }

  @Post('held/:n')
  @DistributedLock({ key: 'provider-b', permits: 2, waitTime: 0 })
  async held(@Param('n') _n: string) {
    await hold.promise;
    return {};
  }
}

/** `@DistributedLock({ permits })`: a semaphore across instances, over HTTP. */
describe('@DistributedLock with permits', () => {
  const prefix = testPrefix();
  let app: INestApplication;

  beforeAll(async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [RedisLockModule.forRoot(lockOptions(prefix))],
      controllers: [ChargesController],
    }).compile();
    app = moduleRef.createNestApplication({ logger: false });
    await app.init();
  });
  afterAll(() => app?.close());

  it('runs at most `permits` calls at once, and really that many', async () => {
    const responses = await Promise.all(
      Array.from({ length: 24 }, () => request(app.getHttpServer()).post('/charges').expect(201)),
    );
    expect(calls.maxInside).toBe(3);
    expect(responses.every((r) => (r.body as { kind: string }).kind === 'semaphore')).toBe(true);
    const tokens = responses.map((r) => (r.body as { token: number }).token);
    expect(new Set(tokens).size).toBe(24); // one fencing token per acquisition
  });

  it('with waitTime 0, a call beyond the permits answers 409 and takes nothing', async () => {
    hold = gate();
    const server = app.getHttpServer();
    const first = request(server)
      .post('/charges/held/1')
      .then((r) => r.status);
    const second = request(server)
      .post('/charges/held/2')
      .then((r) => r.status);
    // Both inside, holding the 2 permits (a third request that came first would take one).
    const permits = app.get(LockService).client.getSemaphore('provider-b', { permits: 2 });
    await eventually(async () => (await permits.availablePermits()) === 0);
    await request(server).post('/charges/held/3').expect(409);
    hold.open();
    expect(await Promise.all([first, second])).toEqual([201, 201]);
    await request(server).post('/charges/held/4').expect(201); // permits came back
  });

  it('refuses permits that are not a whole number >= 1, or combined with a kind or several keys', () => {
    for (const permits of [0, 1.5, '3', -1]) {
      expect(() => compileLockSpec({ key: 'p', permits }, 'A.b')).toThrow(LockOptionsError);
    }
    expect(() => compileLockSpec({ key: 'p', permits: 2, kind: 'fair' }, 'A.b')).toThrow(/one key and no kind/);
    expect(() => compileLockSpec({ key: ['p', 'q'], permits: 2 }, 'A.b')).toThrow(/one key and no kind/);
    expect(compileLockSpec({ key: 'p', permits: 2 }, 'A.b').permits).toBe(2);
  });
});
