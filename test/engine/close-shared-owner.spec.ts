import { connect, lockClient, testPrefix } from '../support/engine';

/**
 * close() releases what this client holds, every hold of it: never a hold of the same explicit owner
 * that another process took (a shared owner is counted in Redis, whichever process took each hold).
 */
describe('close() with an owner another process shares', () => {
  const keyPrefix = testPrefix();

  it.each(['reentrant', 'fair'] as const)(
    "%s lock: the other process's hold of the owner stays in Redis",
    async (kind) => {
      const a = lockClient({ keyPrefix });
      const b = lockClient({ keyPrefix });
      const admin = connect();
      try {
        const name = `shared-${kind}`;
        const lockOf = (c: typeof a) => (kind === 'fair' ? c.locks.getFairLock(name) : c.locks.getLock(name));
        await lockOf(a).lock({ owner: 'job', leaseTime: 20_000 });
        const bHandle = await lockOf(b).lock({ owner: 'job', leaseTime: 20_000 });
        expect(await admin.hget(`${keyPrefix}:{${name}}`, 'job')).toBe('2');

        await a.close();
        // A's hold is gone; B's is still there, as B believes.
        expect(await admin.hget(`${keyPrefix}:{${name}}`, 'job')).toBe('1');
        expect(bHandle.signal.aborted).toBe(false);
        expect(await bHandle.release()).toBe('released');
      } finally {
        await b.close();
        admin.disconnect();
      }
    },
  );
});
