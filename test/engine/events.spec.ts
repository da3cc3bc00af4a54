import { runInLockScope, type LockClientEvents } from '../../lib';
import { eventually, lockClient, sleep, testPrefix, type TestClient } from '../support/engine';

type Recorded = {
  [E in keyof LockClientEvents]: { event: E; payload: LockClientEvents[E][0] };
}[keyof LockClientEvents];

/** The client's lock events, checked against what the test did. */
describe('lock events', () => {
  const prefix = testPrefix();
  let a: TestClient;
  let b: TestClient;
  let n = 0;
  let name: string;
  const seen: Recorded[] = [];
  const names = ['acquired', 'waiting', 'timedOut', 'released', 'lockLost'] as const;
  const record = (client: TestClient) => {
    for (const event of names) {
      const listener = (payload: unknown): void => void seen.push({ event, payload } as Recorded);
      (client.locks.on as (e: string, l: (payload: unknown) => void) => unknown)(event, listener);
    }
  };
  const of = <E extends keyof LockClientEvents>(event: E) =>
    seen
      .filter((r) => r.event === event && (r.payload as { name?: string }).name === name)
      .map((r) => r.payload) as LockClientEvents[E][0][];

  beforeAll(() => {
    a = lockClient({ keyPrefix: prefix });
    b = lockClient({ keyPrefix: prefix });
    record(a);
    record(b);
  });
  beforeEach(() => {
    name = `events-${++n}`;
    seen.length = 0;
  });
  afterAll(async () => {
    await a.close();
    await b.close();
  });

  it('acquired, re-entered and released, with owner, token, wait and hold times', async () => {
    await runInLockScope(async () => {
      const outer = await a.locks.getLock(name).lock();
      const inner = await a.locks.getLock(name).lock();
      await sleep(50);
      expect(await inner.release()).toBe('decremented');
      expect(await outer.release()).toBe('released');
      const acquired = of('acquired');
      expect(acquired.map((e) => [e.kind, e.owner, e.fencingToken, e.reentered])).toEqual([
        ['reentrant', outer.owner, outer.fencingToken, false],
        ['reentrant', outer.owner, outer.fencingToken, true],
      ]);
      const released = of('released');
      expect(released.map((e) => [e.kind, e.owner, e.outcome])).toEqual([
        ['reentrant', outer.owner, 'decremented'],
        ['reentrant', outer.owner, 'released'],
      ]);
      expect(released[1].heldMs).toBeGreaterThanOrEqual(50);
    });
    expect(of('waiting')).toEqual([]);
  });

  it('a contended acquisition: waiting once, then acquired with the time it waited', async () => {
    const lock = a.locks.getFairLock(name);
    const holder = await lock.lock();
    const waiting = b.locks.getFairLock(name).lock({ waitTime: 10_000 });
    await eventually(async () => (await a.redis.llen(lock.keys.queue)) === 1); // queued: it waits
    await sleep(200); // for the waitedMs bound below
    await holder.release();
    const next = await waiting;
    await next.release();
    expect(of('waiting')).toEqual([{ name, kind: 'fair', owner: next.owner }]);
    const acquired = of('acquired').find((e) => e.owner === next.owner)!;
    expect(acquired.waitedMs).toBeGreaterThanOrEqual(200);
    expect(acquired.fencingToken).toBe(next.fencingToken);
  });

  it('timedOut when the wait runs out, and for a refused single attempt (no waiting event then)', async () => {
    const holder = await a.locks.getSimpleLock(name, { leaseTime: 10_000 }).lock();
    expect(await b.locks.getSimpleLock(name).tryLock({ waitTime: 0 })).toBeNull();
    expect(of('waiting')).toEqual([]);
    await expect(b.locks.getSimpleLock(name).lock({ waitTime: 300 })).rejects.toThrow();
    const timedOut = of('timedOut');
    expect(timedOut.map((e) => e.kind)).toEqual(['simple', 'simple']);
    expect(timedOut[1].waitedMs).toBeGreaterThanOrEqual(300);
    expect(of('waiting')).toHaveLength(1);
    await holder.release();
  });

  it('lockLost when a hold is taken away', async () => {
    const handle = await a.locks.getLock(name).lock({ leaseTime: 10_000 });
    await a.redis.del(a.locks.getLock(name).keys.lock);
    expect(await handle.release()).toBe('expired');
    const lost = seen.filter((r) => r.event === 'lockLost').map((r) => r.payload as LockClientEvents['lockLost'][0]);
    expect(lost.map((e) => [e.key, e.reason])).toEqual([[name, 'lease-expired']]); // the key is gone: read as run out
    expect(of('released').map((e) => e.outcome)).toEqual(['expired']);
  });
});
