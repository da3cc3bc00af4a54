import { randomUUID } from 'node:crypto';
import Redis, { Cluster } from 'ioredis';
import { createLockClient, runInLockScope } from '../../lib';
import { quietLogger, sleep } from '../support/engine';
import { sharedTopology } from '../support/topologies';

/** A client the user made: we lock through it, duplicate a subscriber from it, and never close it. */
describe.each([
  ['ioredis client', () => new Redis(sharedTopology('single').masters[0])],
  ['ioredis Cluster', () => new Cluster(sharedTopology('cluster').masters)],
])('existing %s', (_label, make) => {
  it('locks, wakes waiters across slots, and is left open by close()', async () => {
    const client = make();
    const locks = await createLockClient({
      connection: { type: 'client', client },
      keyPrefix: `ex-${randomUUID().slice(0, 8)}`,
      logger: quietLogger,
    });
    try {
      for (const name of ['a', 'b', 'c', 'd', 'e', 'f']) {
        const held = await locks.getLock(name).lock({ leaseTime: 60_000 });
        const waiting = runInLockScope(() => locks.getLock(name).lock({ leaseTime: 5_000 }), { newScope: true });
        await sleep(50);
        const releasedAt = Date.now();
        await held.release();
        await (await waiting).release();
        expect(Date.now() - releasedAt).toBeLessThan(1_000); // woken by the (sharded) message, not the TTL
      }
    } finally {
      await locks.close();
    }
    expect(await client.ping()).toBe('PONG');
    await client.quit();
  });
});
