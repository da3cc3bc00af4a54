import Redis, { type RedisOptions } from 'ioredis';
import { LockLostError, LockOptionsError, MultiLock, runInLockScope, type LockLogger } from '../../lib';
import { deploymentIdentity } from '../../lib/engine/redis/deployment-identity';
import { keysWithoutTtl } from '../support/bad-input';
import {
  eventually,
  isAttemptOn,
  lockClient,
  singlePort,
  sleep,
  testPrefix,
  watchCommands,
  type TestClient,
} from '../support/engine';
import { ReplyDroppingProxy } from '../support/reply-dropping-proxy';
import { sharedTopology } from '../support/topologies';
import { anyKeepsDependants, dependants } from '../support/signal-dependants';

describe('MultiLock', () => {
  const prefix = testPrefix();
  let a: TestClient;
  let b: TestClient;

  beforeAll(() => {
    a = lockClient({ keyPrefix: prefix });
    b = lockClient({ keyPrefix: prefix });
  });
  afterAll(async () => {
    await a.close();
    await b.close();
  });

  it('holds locks of different kinds on different clients all-or-nothing', async () => {
    const multi = new MultiLock([a.locks.getLock('m1'), b.locks.getFairLock('m2'), a.locks.getSimpleLock('m3')]);
    const handle = await multi.lock();
    expect(handle.fencingTokens.every((t) => typeof t === 'number')).toBe(true);
    expect(await a.redis.exists(`${prefix}:{m1}`, `${prefix}:{m2}`, `${prefix}:{m3}`)).toBe(3);
    expect(await handle.release()).toBe('released');
    expect(await a.redis.exists(`${prefix}:{m1}`, `${prefix}:{m2}`, `${prefix}:{m3}`)).toBe(0);
  });

  it('releases a partial acquisition at once when one member is taken', async () => {
    const blocker = await b.locks.getLock('p3').lock({ leaseTime: 10_000 });
    const multi = new MultiLock([a.locks.getLock('p1'), a.locks.getLock('p2'), a.locks.getLock('p3')]);
    expect(await runInLockScope(() => multi.tryLock({ waitTime: 200 }), { newScope: true })).toBeNull();
    expect(await a.redis.exists(`${prefix}:{p1}`, `${prefix}:{p2}`)).toBe(0);
    await blocker.release();
  });

  it('two MultiLocks over the same locks in opposite order do not deadlock', async () => {
    const x = () => a.locks.getLock('d1');
    const y = () => b.locks.getLock('d2');
    let inside = 0;
    let maxInside = 0;
    const run = (locks: ReturnType<typeof x>[]) =>
      new MultiLock(locks).withLock(async () => {
        maxInside = Math.max(maxInside, ++inside);
        await sleep(5);
        inside--;
      });
    await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 ? run([x(), y()]) : run([y(), x()]))));
    expect(maxInside).toBe(1);
  }, 30_000);

  it('sibling branches inside a holder of one member exclude each other on the members it does not hold', async () => {
    const outer = a.locks.getLock('sib-a');
    const multi = new MultiLock([a.locks.getLock('sib-a'), a.locks.getLock('sib-b')]);
    let inside = 0;
    let maxInside = 0;
    await outer.withLock(() =>
      Promise.all(
        [1, 2].map(() =>
          multi.withLock(
            async () => {
              maxInside = Math.max(maxInside, ++inside);
              // From inside, both locks re-enter (the outer holder's and the section's own).
              const nested = a.locks
                .getLock('sib-a')
                .withLock(() => a.locks.getLock('sib-b').withLock(() => 'nested', { waitTime: 1_000 }), {
                  waitTime: 1_000,
                });
              expect(await nested).toBe('nested');
              await sleep(300);
              inside--;
            },
            { waitTime: 5_000 },
          ),
        ),
      ),
    );
    // sib-b's section is entered by nobody else: one branch at a time.
    expect(maxInside).toBe(1);
    expect(await a.redis.exists(`${prefix}:{sib-a}`, `${prefix}:{sib-b}`)).toBe(0);
  }, 30_000);

  it('nested sections re-entering members of a long-held lock leave nothing on the members’ signals', async () => {
    // The probe sees what AbortSignal.any keeps on this Node (else this test would prove nothing).
    expect(anyKeepsDependants()).toBe(true);
    const [first, second] = [a.locks.getLock('keep-a'), a.locks.getLock('keep-b')];
    const multi = new MultiLock([first, second]);
    // Both members held long (a leader's locks); the group's sections inside re-enter them.
    const left = await first.withLock((outerA) =>
      second.withLock(async (outerB) => {
        for (let i = 0; i < 200; i++) {
          expect(await multi.withLock(({ signal }) => signal.aborted)).toBe(false);
        }
        return [dependants(outerA.signal), dependants(outerB.signal)];
      }),
    );
    expect(left).toEqual([0, 0]);
  });

  it('its signal, read before a member is lost, aborts with that loss', async () => {
    const multi = new MultiLock([a.locks.getLock('read-first-a'), a.locks.getLock('read-first-b')]);
    const handle = await multi.lock({ leaseTime: 1_000 });
    const { signal } = handle; // listened for from here on (made when first read)
    expect(signal.aborted).toBe(false);
    await eventually(() => signal.aborted, 10_000); // the members' leases run out
    expect(signal.reason).toBeInstanceOf(LockLostError);
    await handle.release(); // (a drift margin before Redis lets the leases go: it may still release them)
  });

  it('its signal aborts when any member is lost', async () => {
    const multi = new MultiLock([a.locks.getLock('s1'), a.locks.getLock('s2')]);
    const handle = await multi.lock({ leaseTime: 300 });
    await sleep(600);
    expect(handle.signal.aborted).toBe(true);
    expect(await handle.release()).toBe('expired');
  });

  it('withLock logs a failed release, naming the group, and returns or throws what the work did', async () => {
    const warnings: string[] = [];
    const logger: LockLogger = { warn: (message) => warnings.push(message), error: () => undefined };
    // Its own connection: closed inside the work, so the release after it cannot reach Redis.
    const closing = () => lockClient({ keyPrefix: prefix, logger });
    const clients = [closing(), closing()];
    try {
      const [first, second] = clients;
      const group = (n: string) => new MultiLock([first.locks.getLock(`${n}1`), first.locks.getLock(`${n}2`)]);

      const result = await group('rf').withLock(
        async () => {
          await first.redis.quit();
          return 'the work';
        },
        { leaseTime: 2_000 },
      );
      expect(result).toBe('the work');
      expect(warnings).toEqual([expect.stringMatching(/^Could not release lock "rf1\+rf2": /)]);

      const failure = new Error('the work failed');
      const secondGroup = new MultiLock([second.locks.getLock('rg1'), second.locks.getLock('rg2')]);
      await expect(
        secondGroup.withLock(
          async () => {
            await second.redis.quit();
            throw failure;
          },
          { leaseTime: 2_000 },
        ),
      ).rejects.toBe(failure);
      expect(warnings[1]).toMatch(/^Could not release lock "rg1\+rg2" after a failure: /);
      expect(warnings).toHaveLength(2);
    } finally {
      await Promise.all(clients.map((c) => c.close()));
    }
  });

  // On paths the happy tests do not take: what a MultiLock hands over is checked against Redis.
  it('a member whose lease ran out while a later member was awaited is not handed over as held', async () => {
    // 'late-b' (taken second: by key) is held elsewhere for longer than the group's lease.
    const blocker = await b.locks.getLock('late-b').lock({ leaseTime: 30_000 });
    const releasing = new Promise((resolve) => setTimeout(resolve, 2_500)).then(() => blocker.release());
    const multi = new MultiLock([a.locks.getLock('late-a'), a.locks.getLock('late-b')]);
    const handle = await multi.lock({ leaseTime: 1_500, waitTime: 20_000 });
    await releasing;
    try {
      // Handed over: the holder must hold every member, as Redis sees it, and not be told it lost them already.
      expect(handle.signal.aborted).toBe(false);
      expect(await a.redis.exists(`${prefix}:{late-a}`, `${prefix}:{late-b}`)).toBe(2);
    } finally {
      await handle.release();
    }
  }, 30_000);

  it('a member whose client closes while a later member is awaited ends the wait, holding nothing', async () => {
    const closing = lockClient({ keyPrefix: prefix });
    const blocker = await b.locks.getLock('closing-b').lock({ leaseTime: 30_000 });
    const multi = new MultiLock([closing.locks.getLock('closing-a'), a.locks.getLock('closing-b')]);
    const outcome = multi.lock({ waitTime: 20_000 }).then(
      (handle) => handle,
      (error: unknown) => error,
    );
    try {
      await eventually(() => closing.locks.heldLockCount === 1, 5_000); // the first member is held
      await closing.locks.close(); // its hold is given up (LockLostError, closed)
      await blocker.release();
      const result = await outcome;
      // Not handed over (its first member is gone), nor taken again through the closed client.
      expect(result).toBeInstanceOf(LockLostError);
      expect((result as LockLostError).reason).toBe('closed');
      expect(await a.redis.exists(`${prefix}:{closing-a}`, `${prefix}:{closing-b}`)).toBe(0);
    } finally {
      const result = await outcome;
      if (result && typeof result === 'object' && 'release' in result)
        await (result as { release(): Promise<unknown> }).release();
      await closing.redis.quit();
    }
  }, 30_000);
});

describe('MultiLock: a lease shorter than it takes to take its members', () => {
  const prefix = testPrefix();
  let fast: TestClient;
  let slow: TestClient;
  let proxy: ReplyDroppingProxy;

  beforeAll(async () => {
    fast = lockClient({ keyPrefix: prefix });
    // Every reply of the second client's Redis comes 7 ms late: its two members take 14 ms, longer
    // than the 10 ms lease of the first member (which each of them alone outlasts).
    proxy = await ReplyDroppingProxy.start({ host: '127.0.0.1', port: singlePort() });
    slow = lockClient({ keyPrefix: prefix, port: proxy.port });
    await slow.redis.ping();
    await (await slow.locks.getLock('warm-up').tryLock())?.release(); // connected and scripts loaded before the delay
    proxy.delayReplies(7);
  });
  afterAll(async () => {
    await fast.close();
    await slow.close();
    await proxy.close();
  });

  const group = (name: string) =>
    new MultiLock([fast.locks.getLock(`${name}-1`), slow.locks.getLock(`${name}-2`), slow.locks.getLock(`${name}-3`)]);

  it('rounds that lose a member follow one another after a growing pause, not at once: few attempts while the wait lasts', async () => {
    const attempts: number[] = [];
    // A round loses the first member while the slow ones are taken, or a slow member's grant comes after
    // its own lease (then that member tries again, after a pause that grows as well): attempts on any.
    const stops = [fast, slow].map((client) =>
      watchCommands(client, (command) => {
        const onMember = [1, 2, 3].some((i) => isAttemptOn(command, `${prefix}:{bounded-${i}}`));
        if (onMember) attempts.push(Date.now());
      }),
    );
    const startedAt = Date.now();
    try {
      expect(await group('bounded').tryLock({ leaseTime: 10, waitTime: 1_500 })).toBeNull();
    } finally {
      stops.forEach((stop) => stop());
    }
    expect(Date.now() - startedAt).toBeGreaterThanOrEqual(1_400);
    // About 20 ms a round with no pause: some 75 rounds of three attempts. Paused, doubling from 10 ms: about
    // ten attempts (a busy machine mixes rounds and a member's own retries: a few more).
    expect(attempts.length).toBeGreaterThanOrEqual(2);
    expect(attempts.length).toBeLessThanOrEqual(45);
    expect(await fast.redis.exists(`${prefix}:{bounded-1}`, `${prefix}:{bounded-2}`, `${prefix}:{bounded-3}`)).toBe(0);
  }, 30_000);

  it('lock() with no waitTime, whose lease can never suffice, fails with LockOptionsError (leaseTime) instead of trying forever', async () => {
    const outcome = group('never')
      .lock({ leaseTime: 10 })
      .then(
        (handle) => handle,
        (error: unknown) => error,
      );
    const result = await Promise.race([outcome, sleep(10_000).then(() => 'still trying')]);
    expect(result).toBeInstanceOf(LockOptionsError);
    expect((result as LockOptionsError).option).toBe('leaseTime');
    expect((result as LockOptionsError).key).toBe('never-1+never-2+never-3');
    expect(await fast.redis.exists(`${prefix}:{never-1}`, `${prefix}:{never-2}`, `${prefix}:{never-3}`)).toBe(0);
  }, 30_000);

  it('a long enough lease is taken at once through the same slow client', async () => {
    const handle = await group('enough').lock({ leaseTime: 5_000, waitTime: 5_000 });
    expect(handle.signal.aborted).toBe(false);
    expect(await handle.release()).toBe('released');
  }, 30_000);
});

describe('MultiLock members that tie on a name', () => {
  const prefix = testPrefix();
  /** Two stand-ins for processes, each with its own client on each of two independent servers. */
  let sides: TestClient[][];
  /** The lock of `name` on each server, through `side`'s clients. */
  const locksOf = (side: TestClient[], name: string) => side.map((server) => server.locks.getLock(name));

  beforeAll(() => {
    const ports = sharedTopology('multi')
      .masters.slice(0, 2)
      .map((m) => m.port);
    sides = [0, 1].map(() => ports.map((port) => lockClient({ port, keyPrefix: prefix })));
  });
  afterAll(() => Promise.all(sides.flat().map((c) => c.close())));

  it('the same name on two servers, named in opposite orders by two clients, never deadlocks', async () => {
    let inside = 0;
    let maxInside = 0;
    const outcomes: string[] = [];
    for (let round = 0; round < 10; round++) {
      const name = `tie${round}`;
      const groups = [new MultiLock(locksOf(sides[0], name)), new MultiLock(locksOf(sides[1], name).reverse())];
      const take = (group: MultiLock) =>
        group
          .withLock(
            async () => {
              maxInside = Math.max(maxInside, ++inside);
              await sleep(20);
              inside--;
            },
            { waitTime: 5_000 },
          )
          .then(
            () => 'held',
            (error: Error) => error.name,
          );
      outcomes.push(...(await Promise.all(groups.map(take))));
    }
    expect(outcomes).toEqual(Array<string>(20).fill('held'));
    expect(maxInside).toBe(1);
  }, 120_000);

  it('a lock given twice is taken once, at once, and released cleanly', async () => {
    const [[first, second]] = sides;
    const simple = first.locks.getSimpleLock('twice-simple');
    const cases: [string, MultiLock][] = [
      ['twice-simple', new MultiLock([simple, simple])],
      [
        'twice-objects',
        new MultiLock([first.locks.getSimpleLock('twice-objects'), first.locks.getSimpleLock('twice-objects')]),
      ],
      // Two clients on one server: two owners of one lock in Redis, which would wait for each other.
      [
        'twice-clients',
        new MultiLock([first.locks.getLock('twice-clients'), sides[1][0].locks.getLock('twice-clients')]),
      ],
      // Beside a lock of the same name on another server, which is another lock.
      [
        'twice-beside',
        new MultiLock([
          first.locks.getLock('twice-beside'),
          second.locks.getLock('twice-beside'),
          first.locks.getLock('twice-beside'),
        ]),
      ],
    ];
    for (const [name, group] of cases) {
      const handle = await runInLockScope(() => group.tryLock({ waitTime: 2_000 }), { newScope: true });
      expect({ name, held: handle !== null }).toEqual({ name, held: true });
      const tokens = handle!.fencingTokens;
      expect({ name, sameHold: tokens[0] === tokens[tokens.length - 1] }).toEqual({ name, sameHold: true });
      expect(await handle!.release()).toBe('released');
      for (const server of [first, second]) {
        expect({ name, locked: await server.redis.exists(`${prefix}:{${name}}`) }).toEqual({ name, locked: 0 });
        expect({ name, stuck: await keysWithoutTtl(server.redis, `${prefix}:{${name}}`) }).toEqual({ name, stuck: [] });
      }
    }
  });

  it('one name given with two kinds on one server is a LockOptionsError; on two servers it is two locks', async () => {
    const [[first, second]] = sides;
    const rw = first.locks.getReadWriteLock('mixed-rw');
    const mixed = [
      [first.locks.getLock('mixed'), first.locks.getFairLock('mixed')],
      [first.locks.getSimpleLock('mixed'), sides[1][0].locks.getLock('mixed')],
      [rw.readLock(), rw.writeLock()],
    ];
    for (const locks of mixed) {
      expect(() => new MultiLock(locks)).toThrow(LockOptionsError);
      expect(() => new MultiLock(locks)).toThrow(/as a \w+ and as a \w+ lock on one Redis deployment/);
    }
    const apart = new MultiLock([first.locks.getLock('mixed'), second.locks.getFairLock('mixed')]);
    const handle = await apart.lock();
    expect(handle.fencingTokens.every((t) => typeof t === 'number')).toBe(true);
    expect(await handle.release()).toBe('released');
  });

  it('a deployment is named the same from every client configured alike, and apart by address and database', () => {
    const identityOf = (options: RedisOptions) => deploymentIdentity(new Redis({ lazyConnect: true, ...options }));
    const here = identityOf({ host: '127.0.0.1', port: 7001 });
    expect(identityOf({ host: '127.0.0.1', port: 7001 })).toBe(here);
    expect(identityOf({ host: '127.0.0.1', port: 7001, db: 1 })).not.toBe(here);
    expect(identityOf({ host: '127.0.0.1', port: 7002 })).not.toBe(here);
    const sentinels = (order: number[]) =>
      identityOf({ sentinels: order.map((port) => ({ host: '127.0.0.1', port })), name: 'main' });
    expect(sentinels([26379, 26380])).toBe(sentinels([26380, 26379]));
    expect(sentinels([26379, 26380])).not.toBe(sentinels([26381, 26382]));
  });
});
