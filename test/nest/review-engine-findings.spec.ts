import type { INestApplication } from '@nestjs/common';
import type { LockService } from '../../lib';
import { testPrefix } from '../support/engine';
import { lockServiceApp } from './nest-support';

const prefix = testPrefix();

/**
 * Found from the Nest layer, fixed in the engine (GroupLock.withLock): a MultiLock's section opened
 * inside a holder of A, whose locks the holder does not hold, got a scope with no tie to A's, so A asked
 * for again inside it waited for its own holder. It is nested in A's section now, as a single lock's
 * is (test/engine/belief.spec.ts, "A, then B, then A again").
 */
describe('review (engine): A, then a MultiLock of B and C, then A again', () => {
  let app: INestApplication;
  let locks: LockService;

  beforeAll(async () => {
    ({ app, locks } = await lockServiceApp(prefix));
  });
  afterAll(async () => {
    await app.close();
  });

  it('the engine: lock A, then multi([B, C]).withLock, then A again re-enters A', async () => {
    const a = locks.reentrant('eng-a');
    const result = await a.withLock(() =>
      locks
        .multi(['eng-b', 'eng-c'])
        .withLock(() => a.withLock(() => 're-entered', { waitTime: 0 }), { waitTime: 2_000 }),
    );
    expect(result).toBe('re-entered');
    expect(await locks.isLocked('eng-a')).toBe(false);
  });
});
