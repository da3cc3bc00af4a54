import Redis from 'ioredis';
import { RedLock } from '../../lib';
import { loadedScript } from '../../lib/engine/scripts/loader';
import { restartNode, startTopology, stopTopology, type RunningTopology } from '../../scripts/redis-topology';
import { PRIVATE_PORTS } from '../../scripts/test-ports';
import { eventually, lockClient, sleep, testPrefix, type TestClient } from '../support/engine';
import { ReplyDroppingProxy } from '../support/reply-dropping-proxy';
import { sharedTopology } from '../support/topologies';

/**
 * RedLock on paths the happy tests do not take: what its handle says is checked against the masters
 * themselves (their PTTLs), on the shared five independent masters.
 */
describe('RedLock review', () => {
  const prefix = testPrefix();
  const clientsFor = async (options: { watchdogTimeout?: number } = {}): Promise<TestClient[]> => {
    const ports = sharedTopology('multi').masters.map((m) => m.port);
    const clients = ports.map((port) => lockClient({ port, keyPrefix: prefix, operationTimeout: 1_000, ...options }));
    // Connected first: a vote bounded in time must not lose its round to a slow connect on a busy machine.
    await Promise.all(clients.map((c) => c.redis.ping()));
    return clients;
  };
  const closeAll = (clients: TestClient[]) => Promise.all(clients.map((c) => c.close().catch(() => undefined)));
  const pttls = (clients: TestClient[], name: string) =>
    Promise.all(clients.map((c) => c.redis.pttl(c.locks.getSimpleLock(name).keys.lock)));
  /** What the quorum-th (3rd of 5) longest-held master still has. */
  const quorumPttl = async (clients: TestClient[], name: string) =>
    (await pttls(clients, name)).sort((a, b) => b - a)[2];

  it('a watchdog-renewed RedLock over clients of different watchdog timeouts stays held while its holder runs', async () => {
    const ports = sharedTopology('multi').masters.map((m) => m.port);
    // The first master's client renews every 500 ms, the others every 2 s.
    const clients = ports.map((port, i) =>
      lockClient({ port, keyPrefix: prefix, operationTimeout: 1_000, watchdogTimeout: i === 0 ? 1_500 : 6_000 }),
    );
    try {
      await Promise.all(clients.map((c) => c.redis.ping()));
      const handle = await new RedLock(
        clients.map((c) => c.locks),
        'mixed-watchdogs',
      ).lock();
      await sleep(4_000); // two renewals of the slower clients
      expect(handle.signal.aborted).toBe(false);
      expect((await pttls(clients, 'mixed-watchdogs')).filter((ttl) => ttl > 0).length).toBeGreaterThanOrEqual(3);
      expect(await handle.release()).toBe('released');
    } finally {
      await closeAll(clients);
    }
  }, 30_000);

  it('sibling RedLocks of one name in one process (Promise.all) exclude each other, with explicit owners shared', async () => {
    const clients = await clientsFor();
    try {
      let inside = 0;
      let maxInside = 0;
      let sections = 0;
      const branch = (i: number) =>
        new RedLock(
          clients.map((c) => c.locks),
          'siblings',
        ).withLock(
          async () => {
            maxInside = Math.max(maxInside, ++inside);
            await sleep(2);
            inside--;
            sections++;
          },
          { leaseTime: 5_000, waitTime: 30_000, owner: i % 2 ? 'shared-owner' : undefined },
        );
      await Promise.all(Array.from({ length: 6 }, (_, i) => Promise.all([0, 1, 2].map(() => branch(i)))));
      expect(sections).toBe(18);
      expect(maxInside).toBe(1);
    } finally {
      await closeAll(clients);
    }
  }, 60_000);

  it('extend() with no lease on a RedLock taken with a leaseTime renews by that lease, and says so', async () => {
    const clients = await clientsFor({ watchdogTimeout: 30_000 });
    try {
      const handle = await new RedLock(
        clients.map((c) => c.locks),
        'extend-own-lease',
      ).lock({ leaseTime: 2_000 });
      await handle.extend();
      // The masters renewed by the lock's own lease (2 s), not by the watchdog timeout (30 s) ...
      const held = await quorumPttl(clients, 'extend-own-lease');
      expect(held).toBeGreaterThan(0);
      expect(held).toBeLessThanOrEqual(2_000);
      // ... and the handle must not promise more than that.
      expect(handle.validity).toBeLessThanOrEqual(held);
      expect(await handle.release()).toBe('released');
    } finally {
      await closeAll(clients);
    }
  }, 30_000);
});

/** On five masters of its own: a test here flushes a master's scripts, which would slow the suites sharing it. */
describe('RedLock review (private masters)', () => {
  const prefix = testPrefix();
  let topology: RunningTopology | undefined;
  const proxies: ReplyDroppingProxy[] = [];
  beforeAll(async () => {
    topology = await startTopology('multi', { basePort: PRIVATE_PORTS.redLockReview.base });
  }, 60_000);
  afterEach(async () => {
    await Promise.all(proxies.splice(0).map((p) => p.close()));
  });
  afterAll(async () => {
    if (topology) await stopTopology(topology);
  }, 30_000);
  const pttls = (clients: TestClient[], name: string) =>
    Promise.all(clients.map((c) => c.redis.pttl(c.locks.getSimpleLock(name).keys.lock)));
  /**
   * A client per master, the first behind a reply-dropping proxy, each re-sending what was in flight
   * after a reconnect or not (`resend`), and a connection straight to the first master.
   */
  const proxiedClients = async (resend: boolean) => {
    const masters = topology!.masters;
    const proxy = await ReplyDroppingProxy.start(masters[0]);
    proxies.push(proxy);
    const direct = new Redis({ host: '127.0.0.1', port: masters[0].port });
    const clients = masters.map((m, i) => {
      const client = lockClient({ port: i === 0 ? proxy.port : m.port, keyPrefix: prefix, operationTimeout: 2_000 });
      client.redis.options.autoResendUnfulfilledCommands = resend;
      return client;
    });
    const close = async () => {
      await Promise.all(clients.map((c) => c.close().catch(() => undefined)));
      direct.disconnect();
    };
    return { proxy, direct, clients, close };
  };

  it.each([
    ['at once', true],
    ['after the reconnect', true],
    ['at once', false],
  ] as const)(
    'a vote whose reply was lost with its connection is not left behind by a release (%s, re-sent: %s)',
    async (when, resend) => {
      const { proxy, direct, clients, close } = await proxiedClients(resend);
      const name = `lost-reply-${when === 'at once' ? 'now' : 'later'}-${String(resend)}`;
      try {
        await Promise.all(clients.map((c) => c.redis.ping()));
        const redLock = new RedLock(
          clients.map((c) => c.locks),
          name,
        );
        proxy.dropNextReply(/granted/);
        const handle = await redLock.lock({ leaseTime: 60_000 });
        await eventually(() => proxy.dropped === 1, 5_000);
        if (when === 'after the reconnect') await sleep(1_000);
        expect(['released', 'pending']).toContain(await handle.release());
        const key = clients[0].locks.getSimpleLock(name).keys.lock;
        await sleep(1_000);
        await eventually(async () => (await direct.exists(key)) === 0, 5_000);
      } finally {
        await close();
      }
    },
    30_000,
  );

  it('a lost round takes back a vote whose reply was lost with its connection (a client that does not re-send)', async () => {
    const { proxy, direct, clients, close } = await proxiedClients(false);
    try {
      await Promise.all(clients.map((c) => c.redis.ping()));
      // Another holder has the four other masters: every round is lost there.
      const holder = await new RedLock(
        clients.slice(1).map((c) => c.locks),
        'lost-round',
      ).lock({ leaseTime: 60_000 });
      proxy.dropNextReply(/granted/);
      const redLock = new RedLock(
        clients.map((c) => c.locks),
        'lost-round',
      );
      expect(await redLock.tryLock({ leaseTime: 60_000 })).toBeNull();
      await eventually(() => proxy.dropped === 1, 5_000);
      const key = clients[0].locks.getSimpleLock('lost-round').keys.lock;
      // The vote landed on master 0 and nobody holds it: it must not stay there for the 60 s lease.
      await eventually(async () => (await direct.exists(key)) === 0, 5_000);
      await holder.release();
    } finally {
      await close();
    }
  }, 30_000);

  it.each(['watchdog', 'explicit'] as const)(
    'a RedLock (%s lease) whose masters restart empty, a majority of them, tells its holder at the reconnect',
    async (lease) => {
      const ports = topology!.masters.map((m) => m.port);
      const clients = ports.map((port) => lockClient({ port, keyPrefix: prefix, operationTimeout: 1_000 }));
      try {
        await Promise.all(clients.map((c) => c.redis.ping()));
        const handle = await new RedLock(
          clients.map((c) => c.locks),
          `restarted-${lease}`,
        ).lock({ leaseTime: lease === 'explicit' ? 60_000 : undefined }); // watchdog: no renewal due for 10 s
        for (const port of ports.slice(0, 3)) await restartNode(topology!, port);
        const restartedAt = Date.now();
        await eventually(() => handle.signal.aborted, 10_000);
        expect(Date.now() - restartedAt).toBeLessThan(5_000); // at the reconnect, not at the next renewal
        expect(handle.validity).toBe(0);
        await handle.release();
      } finally {
        await Promise.all(clients.map((c) => c.close().catch(() => undefined)));
      }
    },
    60_000,
  );

  it('a caller that aborts while its round is undecided is refused with the reason, and nothing is left held', async () => {
    const masters = topology!.masters;
    // Three masters (a majority) answer only once let through: the round is undecided until then.
    const slow = await Promise.all(masters.slice(0, 3).map((m) => ReplyDroppingProxy.start(m)));
    proxies.push(...slow);
    const clients = masters.map((m, i) =>
      lockClient({ port: i < 3 ? slow[i].port : m.port, keyPrefix: prefix, operationTimeout: 2_000 }),
    );
    try {
      await Promise.all(clients.map((c) => c.redis.ping()));
      const redLock = new RedLock(
        clients.map((c) => c.locks),
        'aborted-mid-round',
        { instanceTimeout: 2_000 },
      );
      const controller = new AbortController();
      const reason = new Error('caller gave up');
      slow.forEach((p) => p.cutOff(true));
      const outcome = redLock.lock({ leaseTime: 10_000, signal: controller.signal }).then(
        (handle) => handle,
        (error: unknown) => error,
      );
      await sleep(100);
      controller.abort(reason);
      await sleep(100);
      slow.forEach((p) => p.cutOff(false));
      const result = await outcome;
      if (result instanceof Error) expect(result).toBe(reason);
      else {
        await (result as { release(): Promise<unknown> }).release();
        throw new Error('lock() resolved with a hold for a caller that had aborted');
      }
      await eventually(async () => (await pttls(clients, 'aborted-mid-round')).every((ttl) => ttl === -2), 3_000);
    } finally {
      slow.forEach((p) => p.cutOff(false));
      await Promise.all(clients.map((c) => c.close().catch(() => undefined)));
    }
  }, 30_000);

  it('a vote still unanswered at the release, whose grant runs after the take-back (NOSCRIPT, then EVAL), is taken back', async () => {
    const masters = topology!.masters;
    // Master 0 through a proxy that can hold its bytes: its vote is still unanswered when the round is decided.
    const proxy = await ReplyDroppingProxy.start(masters[0]);
    proxies.push(proxy);
    const direct = new Redis({ host: '127.0.0.1', port: masters[0].port });
    const clients = masters.map((m, i) =>
      lockClient({ port: i === 0 ? proxy.port : m.port, keyPrefix: prefix, operationTimeout: 2_000 }),
    );
    try {
      await Promise.all(clients.map((c) => c.redis.ping()));
      // Master 0 knows the release script but not the grant script (a restart or SCRIPT FLUSH, then
      // another process's release ran there first): the grant goes EVALSHA, NOSCRIPT, then EVAL.
      await direct.script('FLUSH');
      await direct.script('LOAD', loadedScript('redlock-release-3.lua').source);
      const redLock = new RedLock(
        clients.map((c) => c.locks),
        'takeback-order',
        { instanceTimeout: 2_000 }, // master 0 is not counted as down while its bytes wait
      );
      proxy.cutOff(true);
      const handle = await redLock.lock({ leaseTime: 60_000 });
      expect(await handle.release()).toBe('released'); // by the four other masters
      proxy.cutOff(false);
      const key = clients[0].locks.getSimpleLock('takeback-order').keys.lock;
      await sleep(1_000); // the EVAL of the grant, then its late reply, and whatever it leads to
      // Nobody holds the RedLock: master 0 must not keep a vote for the 60 s lease.
      await eventually(async () => (await direct.exists(key)) === 0, 3_000);
    } finally {
      proxy.cutOff(false);
      await Promise.all(clients.map((c) => c.close().catch(() => undefined)));
      direct.disconnect();
    }
  }, 30_000);
});
