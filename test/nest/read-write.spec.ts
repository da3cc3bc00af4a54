import { Controller, Get, Put, type INestApplication } from '@nestjs/common';
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
import { sleep, testPrefix } from '../support/engine';
import { lockOptions } from './nest-support';

const inside = { readers: 0, writers: 0, maxReaders: 0, violations: 0 };

@Controller('catalog')
class CatalogController {
  @Get(':id')
  @DistributedLock({ key: 'catalog:{params.id}', mode: 'read' })
  async read(@CurrentLock() lock: ActiveLock) {
    inside.readers++;
    inside.maxReaders = Math.max(inside.maxReaders, inside.readers);
    if (inside.writers > 0) inside.violations++;
    await sleep(15);
    inside.readers--;
    return { kind: lock.kind };
  }

  @Put(':id')
  @DistributedLock({ key: 'catalog:{params.id}', mode: 'write' })
  async write(@CurrentLock() lock: ActiveLock) {
    inside.writers++;
    if (inside.writers > 1 || inside.readers > 0) inside.violations++;
    await sleep(15);
    inside.writers--;
    return { kind: lock.kind, token: lock.fencingToken };
  }
}

/** `@DistributedLock({ mode })`: the read and write sides of a read-write lock, over HTTP. */
describe('@DistributedLock with mode', () => {
  const prefix = testPrefix();
  let app: INestApplication;

  beforeAll(async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [RedisLockModule.forRoot(lockOptions(prefix))],
      controllers: [CatalogController],
    }).compile();
    app = moduleRef.createNestApplication({ logger: false });
    await app.init();
  });
  afterAll(() => app?.close());

  it('reads run together, a write runs alone; write tokens grow', async () => {
    const server = app.getHttpServer();
    const calls = Array.from({ length: 30 }, (_, i) =>
      i % 6 === 0 ? request(server).put('/catalog/c1').expect(200) : request(server).get('/catalog/c1').expect(200),
    );
    const responses = await Promise.all(calls);
    expect(inside.violations).toBe(0);
    expect(inside.maxReaders).toBeGreaterThan(1);
    const kinds = responses.map((r) => (r.body as { kind: string }).kind);
    expect(kinds.filter((k) => k === 'write')).toHaveLength(5);
    expect(kinds.filter((k) => k === 'read')).toHaveLength(25);
    const tokens = responses.flatMap((r) => ((r.body as { token?: number }).token ? [r.body.token as number] : []));
    expect(new Set(tokens).size).toBe(5);
  });

  it('LockService.withLock takes the mode too', async () => {
    const locks = app.get(LockService);
    const kind = await locks.withLock('catalog:c2', (lock) => lock.kind, { mode: 'write' });
    expect(kind).toBe('write');
    await expect(locks.withLock('catalog:c2', () => 1, { mode: 'read', kind: 'fair' })).rejects.toThrow(
      LockOptionsError,
    );
  });

  it("refuses a mode other than 'read' or 'write', or combined with a kind or permits", () => {
    expect(() => compileLockSpec({ key: 'c', mode: 'upgrade' }, 'A.b')).toThrow(/mode must be 'read' or 'write'/);
    expect(() => compileLockSpec({ key: 'c', mode: 'read', fair: true }, 'A.b')).toThrow(LockOptionsError);
    expect(() => compileLockSpec({ key: 'c', mode: 'read', permits: 2 }, 'A.b')).toThrow(LockOptionsError);
    expect(compileLockSpec({ key: 'c', mode: 'write' }, 'A.b').mode).toBe('write');
  });
});
