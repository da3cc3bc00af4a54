import { randomUUID } from 'node:crypto';
import { LockNotHeldError } from '../../lib';
import { lockKeys } from '../../lib/internal';
import { eventually, sleep } from '../support/engine';
import { useIdentityWorld, type IdentityWorld } from '../support/identity-world';

/**
 * Identity by id (issue 38), for the fair lock: explicit owners shared across clients (two LockClients
 * stand for two processes: each has its own connections, client id and memory), replies lost between
 * Redis and the client, and the application's own ioredis client re-sending what it sent. Every hold,
 * an accepted hand-off's too, is recorded under its attempt's id; a release names the hold it ends;
 * a repeat is recognised by its id, never by a count a client remembers.
 */
describe('identity by id: explicit owners and repeated commands (fair lock)', () => {
  const keyPrefix = `fid-${randomUUID().slice(0, 8)}`;
  const fairOptions = { staleWaiterTimeout: 3_000, acceptanceLease: 2_000 };
  /**
   * A wait whose hold's lease (the watchdog's 30 s) is shorter than its acceptance lease registers no
   * hold id: it is offered the lock and accepts it, never granted in the message (see fair-queue.lua).
   */
  // Offered, not granted in the message (the wait's lease is shorter than the acceptance lease), so the waiter
  // accepts; and no periodic retry of the wait (every third of staleWaiterTimeout) while a case runs.
  const acceptingOptions = { ...fairOptions, acceptanceLease: 31_000, staleWaiterTimeout: 60_000 };

  /**
   * The wait of client `c` on `name` is queued, its client listens on its channel, and the attempt it makes
   * once listening is over: the hand-off of the next release reaches it by message, and it accepts, not an
   * attempt of its own already on its way (which takes the offer over, with no accept to lose).
   */
  const waitSettled = async (c: { locks: { clientId: string } }, name: string) => {
    const keys = lockKeys(keyPrefix, name);
    await eventually(async () => (await world.plain.llen(keys.queue)) === 1, 5_000);
    const channel = `${keys.channel}:${c.locks.clientId}`;
    await eventually(async () => ((await world.plain.pubsub('NUMSUB', channel)) as [string, number])[1] > 0, 5_000);
    await sleep(300);
  };

  const world = useIdentityWorld(keyPrefix);

  /** A client of its own, as another process would have (see IdentityWorld), with its fair locks. */
  function client(options?: Parameters<IdentityWorld['client']>[0]) {
    const c = world.client(options);
    return { ...c, fair: (name: string) => c.locks.getFairLock(name, fairOptions) };
  }
  /** The owners' holds (a field starting with NUL is the fair lock's record of the wait it was granted to). */
  const holders = async (name: string) =>
    Object.fromEntries(
      Object.entries(await world.plain.hgetall(lockKeys(keyPrefix, name).lock)).filter(([field]) => field[0] !== '\0'),
    );
  const lockKeysLeft = (name: string) => {
    const k = lockKeys(keyPrefix, name);
    return world.plain.exists(k.lock, k.queue, k.deadlines);
  };

  it('a re-entry by an explicit owner from another process is counted, also when the client re-enters a hold of its own, and its releases leave the other holder its hold (defect 3)', async () => {
    const a = client();
    const b = client();
    const rival = client();
    const name = 'shared-owner';
    const held = await b.fair(name).lock({ owner: 'job-8' });
    // A knows no hold of job-8; then A re-enters its own: A counts 1 hold before it, Redis 2.
    const reentry = await a.fair(name).lock({ owner: 'job-8' });
    const nested = await a.fair(name).lock({ owner: 'job-8' });
    expect(await holders(name)).toEqual({ 'job-8': '3' });
    expect([reentry.fencingToken, nested.fencingToken]).toEqual([held.fencingToken, held.fencingToken]);
    expect(await nested.release()).toBe('decremented');
    expect(await reentry.release()).toBe('decremented');
    expect(await holders(name)).toEqual({ 'job-8': '1' });
    expect(await rival.fair(name).tryLock({ owner: 'rival' })).toBeNull();
    expect(held.signal.aborted).toBe(false);
    expect(await held.release()).toBe('released');
    expect(await lockKeysLeft(name)).toBe(0);
    expect([...a.lost, ...b.lost]).toEqual([]);
  });

  it('unlock({ owner }) of a hold taken elsewhere, re-sent after its reply was lost, releases one hold (defect 5)', async () => {
    const a = client({ viaProxy: true });
    const b = client();
    const name = 'unlock-by-owner';
    const outer = await b.fair(name).lock({ owner: 'job-5' });
    const inner = await b.fair(name).lock({ owner: 'job-5' });
    expect(await holders(name)).toEqual({ 'job-5': '2' });
    const dropped = world.proxy.dropped;
    world.proxy.dropNextReply(/decremented/);
    expect(await a.fair(name).unlock({ owner: 'job-5' })).toBe('decremented');
    expect(world.proxy.dropped).toBe(dropped + 1);
    expect(await holders(name)).toEqual({ 'job-5': '1' });
    // The holder's own releases: one hold was released for it already; the other frees the lock.
    expect(await inner.release()).toBe('decremented');
    expect(await outer.release()).toBe('released');
    expect(await lockKeysLeft(name)).toBe(0);
    expect(b.lost).toEqual([]);
    await expect(a.fair(name).unlock({ owner: 'job-5' })).rejects.toBeInstanceOf(LockNotHeldError);
  });

  it('unlock({ owner }) from another process ended one of two holds; once the holder releases the other, its last handle aborts (not-owner)', async () => {
    const a = client();
    const b = client();
    const name = 'unlock-by-owner-outer-first';
    const outer = await b.fair(name).lock({ owner: 'job-5' });
    const inner = await b.fair(name).lock({ owner: 'job-5' });
    expect(await a.fair(name).unlock({ owner: 'job-5' })).toBe('decremented');
    expect(await outer.release()).toBe('released');
    expect(await lockKeysLeft(name)).toBe(0);
    expect(inner.signal.aborted).toBe(true);
    expect(b.lost.map((e) => e.reason)).toEqual(['not-owner']);
    // Its holder's release finds nothing to release: told so, not 'released'.
    expect(await inner.release()).toBe('expired');
    expect(await a.fair(name).tryLock({ owner: 'rival' })).not.toBeNull();
  });

  it("a release re-sent by the application's client after its reply was lost reports what the first copy did (defect 10)", async () => {
    const a = client({ viaProxy: true });
    const name = 'resent-release';
    const handle = await a.fair(name).lock({ leaseTime: 30_000 });
    const dropped = world.proxy.dropped;
    world.proxy.dropNextReply(/released/);
    expect(await handle.release()).toBe('released');
    expect(world.proxy.dropped).toBe(dropped + 1);
    expect(a.lost).toEqual([]);
    expect(await lockKeysLeft(name)).toBe(0);
  });

  it("an accepted hand-off whose accept reply was lost (re-sent by the application's client) is one hold, released once", async () => {
    const a = client({ viaProxy: true });
    const b = client();
    const rival = client();
    const name = 'accept-lost';
    const blocker = await b.fair(name).lock();
    const waiting = a.locks.getFairLock(name, acceptingOptions).lock({ owner: 'job-h', waitTime: 15_000 });
    await waitSettled(a, name);
    const dropped = world.proxy.dropped;
    world.proxy.dropNextReply(/^:1\r\n$/); // FAIR_ACCEPT's 'yes', alone on A's command connection
    expect(await blocker.release()).toBe('released');
    const handle = await waiting;
    expect(world.proxy.dropped).toBe(dropped + 1);
    expect(handle.fencingToken).toBeGreaterThan(blocker.fencingToken);
    expect(await holders(name)).toEqual({ 'job-h': '1' });
    expect(await rival.fair(name).tryLock({ owner: 'rival' })).toBeNull();
    expect(await handle.release()).toBe('released');
    expect(await lockKeysLeft(name)).toBe(0);
    expect(a.lost).toEqual([]);
  });

  it('an accepted hand-off whose accept reply was lost on a connection that never re-sends: the client sends it again and the copy finds its own record, one hold, released once', async () => {
    const a = client({ viaProxy: 'library' });
    const b = client();
    const name = 'accept-lost-library';
    await eventually(async () => a.locks.redis.status === 'ready', 5_000);
    const blocker = await b.fair(name).lock();
    const waiting = a.locks.getFairLock(name, acceptingOptions).lock({ owner: 'job-l', waitTime: 15_000 });
    await waitSettled(a, name);
    const dropped = world.proxy.dropped;
    world.proxy.dropNextReply(/^:1\r\n$/);
    expect(await blocker.release()).toBe('released');
    const handle = await waiting;
    expect(world.proxy.dropped).toBe(dropped + 1);
    expect(await holders(name)).toEqual({ 'job-l': '1' });
    expect(await handle.release()).toBe('released');
    expect(await lockKeysLeft(name)).toBe(0);
    expect(a.lost).toEqual([]);
  });

  it('a release replayed after a connection drop never deletes the hold another process took since under the same owner (defect 2)', async () => {
    const a = client();
    const b = client();
    const rival = client();
    const name = 'replayed';
    const first = await a.fair(name).lock({ owner: 'job-7' });
    expect(await first.release()).toBe('released');
    const taken = await b.fair(name).lock({ owner: 'job-7' });
    // A's connection drops and comes back: it sends its recent releases again, each naming its hold.
    await world.plain.client('KILL', 'ID', String(await a.locks.redis.client('ID')));
    await eventually(async () => a.locks.redis.status === 'ready', 5_000);
    await sleep(300);
    expect(await holders(name)).toEqual({ 'job-7': '1' });
    expect(taken.signal.aborted).toBe(false);
    expect(await rival.fair(name).tryLock({ owner: 'rival' })).toBeNull();
    expect(await taken.release()).toBe('released');
  });

  it("a re-sent attempt of the application's client and the replay of an earlier release never take the new hold back (defect 4)", async () => {
    const a = client({ viaProxy: true, replicaSync: false });
    const rival = client();
    const name = 'resent-and-replayed';
    expect(await (await a.fair(name).lock({ owner: 'job-4' })).release()).toBe('released');
    const dropped = world.proxy.dropped;
    world.proxy.dropNextReply(/granted/);
    const again = await a.fair(name).lock({ owner: 'job-4', waitTime: 5_000 });
    expect(world.proxy.dropped).toBe(dropped + 1); // lost, re-sent by ioredis, and the release replayed
    await sleep(300);
    expect(await holders(name)).toEqual({ 'job-4': '1' });
    expect(again.signal.aborted).toBe(false);
    expect(await rival.fair(name).tryLock({ owner: 'rival' })).toBeNull();
    expect(await again.release()).toBe('released');
    expect(await lockKeysLeft(name)).toBe(0);
  });

  it('forceUnlock ends every hold: a release of one afterwards reports it gone, and a new grant of the same owner is not touched by it', async () => {
    const a = client();
    const b = client();
    const name = 'forced';
    const held = await a.fair(name).lock({ owner: 'job-f', leaseTime: 30_000 });
    expect(await b.fair(name).forceUnlock()).toBe(true);
    // Every hold's record ended with it; the records stay to answer repeats.
    const records = Object.values(await world.plain.hgetall(lockKeys(keyPrefix, name).grants));
    expect(records.filter((value) => /^[ge]/.test(value))).toEqual([]);
    const again = await b.fair(name).lock({ owner: 'job-f', leaseTime: 30_000 });
    expect(await held.release()).toBe('expired');
    expect(await holders(name)).toEqual({ 'job-f': '1' });
    expect(await again.release()).toBe('released');
    expect(await lockKeysLeft(name)).toBe(0);
  });
});
