import { randomUUID } from 'node:crypto';
import { LockNotHeldError } from '../../lib';
import { lockKeys } from '../../lib/internal';
import { eventually, sleep } from '../support/engine';
import { useIdentityWorld, type IdentityWorld } from '../support/identity-world';

/**
 * Identity by id (issue 38), for the reentrant lock: explicit owners shared across clients (two
 * LockClients stand for two processes: each has its own connections, client id and memory), replies
 * lost between Redis and the client, and the application's own ioredis client re-sending what it sent.
 * A release names the hold it ends; a repeat is recognised by its id; nothing is inferred from owner
 * text or from counts a client remembers.
 */
describe('identity by id: explicit owners and repeated commands (reentrant lock)', () => {
  const keyPrefix = `id-${randomUUID().slice(0, 8)}`;

  const world = useIdentityWorld(keyPrefix);

  const client = (options?: Parameters<IdentityWorld['client']>[0]) => world.client(options);
  const holders = (name: string) => world.plain.hgetall(lockKeys(keyPrefix, name).lock);

  it('a release replayed after a connection drop never deletes the hold another process took since under the same owner (defect 2)', async () => {
    const a = client();
    const b = client();
    const rival = client();
    const name = 'replayed';
    const first = await a.locks.getLock(name).lock({ owner: 'job-7' });
    expect(await first.release()).toBe('released');
    const taken = await b.locks.getLock(name).lock({ owner: 'job-7' });
    // A's connection drops and comes back: it sends its recent releases again.
    await world.plain.client('KILL', 'ID', String(await a.locks.redis.client('ID')));
    await eventually(async () => a.locks.redis.status === 'ready', 5_000);
    await sleep(300);
    expect(await holders(name)).toEqual({ 'job-7': '1' });
    expect(taken.signal.aborted).toBe(false);
    expect(await rival.locks.getLock(name).tryLock({ owner: 'rival' })).toBeNull();
    expect(await taken.release()).toBe('released');
  });

  it('a re-entry by an explicit owner from another process is counted, and its release leaves the first holder its hold (defect 3)', async () => {
    const a = client();
    const b = client();
    const rival = client();
    const name = 'shared-owner';
    const held = await b.locks.getLock(name).lock({ owner: 'job-8' });
    const reentry = await a.locks.getLock(name).lock({ owner: 'job-8' });
    expect(await holders(name)).toEqual({ 'job-8': '2' });
    expect(reentry.fencingToken).toBe(held.fencingToken);
    expect(await reentry.release()).toBe('decremented');
    expect(await holders(name)).toEqual({ 'job-8': '1' });
    expect(await rival.locks.getLock(name).tryLock({ owner: 'rival' })).toBeNull();
    expect(held.signal.aborted).toBe(false);
    expect(await held.release()).toBe('released');
    expect(await holders(name)).toEqual({});
  });

  it("a re-sent attempt of the application's client and the replay of an earlier release never take the new hold back (defect 4)", async () => {
    const a = client({ viaProxy: true, replicaSync: false });
    const rival = client();
    const name = 'resent-and-replayed';
    expect(await (await a.locks.getLock(name).lock({ owner: 'job-4' })).release()).toBe('released');
    const dropped = world.proxy.dropped;
    world.proxy.dropNextReply(/granted/);
    const again = await a.locks.getLock(name).lock({ owner: 'job-4', waitTime: 5_000 });
    expect(world.proxy.dropped).toBe(dropped + 1); // lost, re-sent by ioredis, and the release replayed
    await sleep(300);
    expect(await holders(name)).toEqual({ 'job-4': '1' });
    expect(again.signal.aborted).toBe(false);
    expect(await rival.locks.getLock(name).tryLock({ owner: 'rival' })).toBeNull();
    expect(await again.release()).toBe('released');
    expect(await holders(name)).toEqual({});
  });

  it('unlock({ owner }) of a hold taken elsewhere, re-sent after its reply was lost, releases one hold (defect 5)', async () => {
    const a = client({ viaProxy: true });
    const b = client();
    const name = 'unlock-by-owner';
    const outer = await b.locks.getLock(name).lock({ owner: 'job-5' });
    const inner = await b.locks.getLock(name).lock({ owner: 'job-5' });
    expect(await holders(name)).toEqual({ 'job-5': '2' });
    const dropped = world.proxy.dropped;
    world.proxy.dropNextReply(/decremented/);
    expect(await a.locks.getLock(name).unlock({ owner: 'job-5' })).toBe('decremented');
    expect(world.proxy.dropped).toBe(dropped + 1);
    expect(await holders(name)).toEqual({ 'job-5': '1' });
    // The holder's own releases: one hold was released for it already; the other frees the lock.
    expect(await inner.release()).toBe('decremented');
    expect(await outer.release()).toBe('released');
    expect(await holders(name)).toEqual({});
    expect(b.lost).toEqual([]);
  });

  it('unlock({ owner }) from another process ended one of two holds; once the holder releases the other, its last handle aborts (not-owner)', async () => {
    const a = client();
    const b = client();
    const name = 'unlock-by-owner-outer-first';
    const outer = await b.locks.getLock(name).lock({ owner: 'job-5' });
    const inner = await b.locks.getLock(name).lock({ owner: 'job-5' });
    expect(await a.locks.getLock(name).unlock({ owner: 'job-5' })).toBe('decremented');
    // Redis counted two holds and one was released for the owner: the holder's next release is its last.
    expect(await outer.release()).toBe('released');
    expect(await holders(name)).toEqual({});
    expect(inner.signal.aborted).toBe(true);
    expect(b.lost.map((e) => e.reason)).toEqual(['not-owner']);
    // Its holder's release finds nothing to release: told so, not 'released'.
    expect(await inner.release()).toBe('expired');
    expect(await a.locks.getLock(name).tryLock({ owner: 'rival' })).not.toBeNull();
  });

  it('unlock({ owner }) whose reply was lost on a connection that never re-sends is sent again by the library under the same call id: one hold ends', async () => {
    const a = client({ viaProxy: 'no-resend' });
    const b = client();
    const name = 'unlock-by-owner-retried';
    const outer = await b.locks.getLock(name).lock({ owner: 'job-11' });
    const inner = await b.locks.getLock(name).lock({ owner: 'job-11' });
    const dropped = world.proxy.dropped;
    world.proxy.dropNextReply(/decremented/);
    expect(await a.locks.getLock(name).unlock({ owner: 'job-11' })).toBe('decremented');
    expect(world.proxy.dropped).toBe(dropped + 1);
    expect(await holders(name)).toEqual({ 'job-11': '1' });
    expect(await inner.release()).toBe('decremented');
    expect(await outer.release()).toBe('released');
  });

  it('unlock({ owner }) that found the owner holding nothing, re-sent after its reply was lost, leaves the hold the owner took meanwhile', async () => {
    const a = client({ viaProxy: true });
    const b = client();
    const rival = client();
    const name = 'unlock-by-owner-none';
    const dropped = world.proxy.dropped;
    world.proxy.dropNextReply(/not-locked/);
    const cancelled = a.locks.getLock(name).unlock({ owner: 'job-12' });
    cancelled.catch(() => undefined);
    // Its reply is lost; the job starts again before the copy is re-sent on the new connection.
    await eventually(() => world.proxy.dropped === dropped + 1, 5_000, 1);
    const held = await b.locks.getLock(name).lock({ owner: 'job-12' });
    await expect(cancelled).rejects.toThrow(LockNotHeldError);
    expect(await holders(name)).toEqual({ 'job-12': '1' });
    expect(await rival.locks.getLock(name).tryLock({ owner: 'rival' })).toBeNull();
    expect(await held.release()).toBe('released');
  });

  it('an explicit owner is recorded under its own id when the lock was contended, so another process can unlock it (defect 6)', async () => {
    const a = client();
    const b = client();
    const name = 'contended-explicit';
    const blocker = await b.locks.getLock(name).lock();
    const waiting = a.locks.getLock(name).lock({ owner: 'job-6', waitTime: 10_000 });
    await sleep(100);
    expect(await blocker.release()).toBe('released');
    const handle = await waiting;
    expect(await holders(name)).toEqual({ 'job-6': '1' });
    expect(handle.owner).toBe('job-6');
    expect(await b.locks.getLock(name).unlock({ owner: 'job-6' })).toBe('released');
    expect(await holders(name)).toEqual({});
    await expect(b.locks.getLock(name).unlock({ owner: 'job-6' })).rejects.toBeInstanceOf(LockNotHeldError);
    // The watchdog does not bring it back, and the holder learns its hold is gone when it releases.
    await a.locks.getLock(name).getHoldCount('job-6');
    expect(await handle.release()).toBe('released');
    expect(await holders(name)).toEqual({});
  });

  it('owners are opaque: a prefix, a colon or braces name another owner', async () => {
    const a = client();
    const b = client();
    const name = 'opaque';
    const handle = await a.locks.getLock(name).lock({ owner: 'job:2' });
    for (const other of ['job', 'job:', 'job:2:', '{job:2}', 'job:2 ']) {
      await expect(b.locks.getLock(name).unlock({ owner: other })).rejects.toBeInstanceOf(LockNotHeldError);
      expect(await b.locks.getLock(name).tryLock({ owner: other })).toBeNull();
    }
    expect(await holders(name)).toEqual({ 'job:2': '1' });
    expect(await handle.release()).toBe('released');
  });

  it("a release re-sent by the application's client after its reply was lost reports what the first copy did (defect 10)", async () => {
    const a = client({ viaProxy: true });
    const name = 'resent-release';
    const handle = await a.locks.getLock(name).lock({ leaseTime: 30_000 });
    const dropped = world.proxy.dropped;
    world.proxy.dropNextReply(/released/);
    expect(await handle.release()).toBe('released');
    expect(world.proxy.dropped).toBe(dropped + 1);
    expect(a.lost).toEqual([]);
    expect(await holders(name)).toEqual({});
  });
});
