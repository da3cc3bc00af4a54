import type { LockHandle, Semaphore } from '../../lib';
import { QUIET_RECHECK_MS } from '../../lib/engine/lock/lock-base';
import { lockClient, sleep, testPrefix, type TestClient } from '../support/engine';

/**
 * A wake-up that the woken process cannot use (it wants more permits than are free, it has no waiter
 * left, its waiter gave up) goes at once to a waiting process that can use it: a free permit never
 * sits beside a waiter that could take it until the quiet re-check (QUIET_RECHECK_MS) comes round.
 * Each client here is a process of its own (a client id of its own, as another process would have).
 */
describe('Semaphore: a wake-up the woken process cannot use is passed on at once', () => {
  const prefix = testPrefix();
  /** Well under the quiet re-check, which would otherwise let a 1-permit waiter in about 700 ms after the release. */
  const PROMPT_MS = 400;
  const ROUNDS = 3;
  let holder: TestClient;
  let big: TestClient;
  let small: TestClient;
  let n = 0;

  beforeAll(() => {
    [holder, big, small] = [0, 1, 2].map(() => lockClient({ keyPrefix: prefix }));
  });
  afterAll(async () => {
    await Promise.all([holder, big, small].map((c) => c.close()));
  });

  const semaphoreOf = (client: TestClient, name: string): Semaphore => client.locks.getSemaphore(name, { permits: 5 });

  /** Resolves when `settled` does, or after `ms` at the latest (no timer left behind). */
  async function within(settled: Promise<unknown>, ms: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([settled, new Promise((resolve) => (timer = setTimeout(resolve, ms)))]);
    clearTimeout(timer);
  }

  /** A wait whose outcome can be read without awaiting it. */
  function watch(waiting: Promise<LockHandle>) {
    const state: { handle?: LockHandle; error?: unknown; at?: number } = {};
    const settled = waiting.then(
      (handle) => Object.assign(state, { handle, at: Date.now() }),
      (error: unknown) => Object.assign(state, { error, at: Date.now() }),
    );
    return { state, settled };
  }

  /** All 5 permits held by `holder`, as a 3-permit and a 2-permit hold with long leases. */
  async function fullHouse(name: string) {
    const semaphore = semaphoreOf(holder, name);
    const three = await semaphore.acquire({ permits: 3, leaseTime: 60_000 });
    const two = await semaphore.acquire({ permits: 2, leaseTime: 60_000 });
    return { three, two };
  }

  it.each(Array.from({ length: ROUNDS }, (_, i) => [i + 1]))(
    'round %i: 2 permits freed while a 3-permit waiter has waited longest go to a 1-permit waiter of another process at once',
    async () => {
      const name = `mixed-${++n}`;
      const { three, two } = await fullHouse(name);
      const wantsThree = watch(semaphoreOf(big, name).acquire({ permits: 3, waitTime: 30_000 }));
      await sleep(300); // refused and parked: its process has waited longest
      const wantsOne = watch(semaphoreOf(small, name).acquire({ waitTime: 30_000 }));
      await sleep(300);
      const releasedAt = Date.now();
      expect(await two.release()).toBe('released');
      await within(wantsOne.settled, QUIET_RECHECK_MS + 2_000);
      expect(wantsOne.state.handle).toBeDefined();
      expect(wantsOne.state.at! - releasedAt).toBeLessThan(PROMPT_MS);
      // 1 permit is free beside the 3-permit waiter: it waits on, and nobody holds more than the limit.
      expect(wantsThree.state).toEqual({});
      expect(await semaphoreOf(holder, name).availablePermits()).toBe(1);
      await three.release();
      await wantsThree.settled;
      expect(wantsThree.state.handle).toBeDefined();
      expect(await semaphoreOf(holder, name).availablePermits()).toBe(1);
      await Promise.all([wantsOne.state.handle!.release(), wantsThree.state.handle!.release()]);
      expect(await semaphoreOf(holder, name).availablePermits()).toBe(5);
    },
  );

  it.each(Array.from({ length: ROUNDS }, (_, i) => [i + 1]))(
    'round %i: the same within one process: its 1-permit waiter gets the permits its 3-permit waiter cannot use',
    async () => {
      const name = `local-${++n}`;
      const { three, two } = await fullHouse(name);
      const wantsThree = watch(semaphoreOf(big, name).acquire({ permits: 3, waitTime: 30_000 }));
      await sleep(300);
      const wantsOne = watch(semaphoreOf(big, name).acquire({ waitTime: 30_000 }));
      await sleep(300);
      const releasedAt = Date.now();
      await two.release();
      await within(wantsOne.settled, QUIET_RECHECK_MS + 2_000);
      expect(wantsOne.state.handle).toBeDefined();
      expect(wantsOne.state.at! - releasedAt).toBeLessThan(PROMPT_MS);
      expect(wantsThree.state).toEqual({});
      await three.release();
      await wantsThree.settled;
      expect(wantsThree.state.handle).toBeDefined();
      await Promise.all([wantsOne.state.handle!.release(), wantsThree.state.handle!.release()]);
      expect(await semaphoreOf(holder, name).availablePermits()).toBe(5);
    },
  );

  /** How the waiter woken first gives up: its signal aborts, or its waitTime runs out. */
  const GIVING_UP = (['abort', 'waitTime'] as const).flatMap((how) =>
    [-30, 0, 2, 10].map((offsetMs) => [how, offsetMs] as const),
  );

  it.each(GIVING_UP)(
    'a waiter that gives up (%s) %i ms from the release of 1 permit that wakes it: the permit is not left free beside the next process',
    async (how, offsetMs) => {
      const name = `gives-up-${++n}`;
      const semaphore = semaphoreOf(holder, name);
      const one = await semaphore.acquire({ leaseTime: 60_000 });
      const four = await semaphore.acquire({ permits: 4, leaseTime: 60_000 });
      const controller = new AbortController();
      const waitTime = 600;
      const startedAt = Date.now();
      const leaving = watch(
        semaphoreOf(big, name).acquire(how === 'abort' ? { signal: controller.signal } : { waitTime }),
      );
      await sleep(300); // its process has waited longest: the release wakes it
      const staying = watch(semaphoreOf(small, name).acquire({ waitTime: 30_000 }));
      const giveUpAt = how === 'abort' ? Date.now() + 200 : startedAt + waitTime;
      const releaseAt = giveUpAt - offsetMs;
      if (how === 'abort') setTimeout(() => controller.abort(new Error('gave up')), giveUpAt - Date.now());
      await sleep(releaseAt - Date.now());
      const releasedAt = Date.now();
      expect(await one.release()).toBe('released');
      await leaving.settled; // granted, aborted, or out of time: soon either way
      let freeSince = Math.max(releasedAt, leaving.state.at!);
      if (leaving.state.handle) {
        // It took the permit before it gave up: none is free, and the next process waits for it.
        expect(staying.state).toEqual({});
        expect(await semaphore.availablePermits()).toBe(0);
        freeSince = Date.now();
        await leaving.state.handle.release();
      }
      await within(staying.settled, QUIET_RECHECK_MS + 2_000);
      expect(staying.state.handle).toBeDefined();
      // Granted as soon as the permit was free: at the release, when the woken waiter gave up, or when
      // it released the permit it took.
      expect(staying.state.at! - freeSince).toBeLessThan(PROMPT_MS);
      expect(await semaphore.availablePermits()).toBe(0);
      await Promise.all([staying.state.handle!.release(), four.release()]);
      expect(await semaphore.availablePermits()).toBe(5);
    },
  );

  it('mixed sizes (1 and 3 of 5) from four processes: never more than 5 held, and every waiter gets in', async () => {
    const name = `stress-${++n}`;
    const clients = [holder, big, small, lockClient({ keyPrefix: prefix })];
    let inside = 0;
    let maxInside = 0;
    const entries: number[] = [];
    const runUntil = Date.now() + 3_000;
    try {
      await Promise.all(
        clients.flatMap((client, c) =>
          [1, 3, 1].map(async (permits, w) => {
            let count = 0;
            const semaphore = semaphoreOf(client, name);
            while (Date.now() < runUntil) {
              await semaphore.withPermits(
                async () => {
                  inside += permits;
                  maxInside = Math.max(maxInside, inside);
                  await sleep(2 + ((c + w + count) % 5));
                  inside -= permits;
                },
                { permits, waitTime: 20_000 },
              );
              count++;
            }
            entries.push(count);
          }),
        ),
      );
    } finally {
      await clients[3].close();
    }
    expect(maxInside).toBeLessThanOrEqual(5);
    expect(maxInside).toBeGreaterThan(3); // the permits were really shared
    expect(entries.every((count) => count > 0)).toBe(true);
    expect(await semaphoreOf(holder, name).availablePermits()).toBe(5);
  }, 60_000);
});
