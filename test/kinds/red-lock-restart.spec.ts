import Redis from 'ioredis';
import { LockClient, LockOptionsError, LockQuorumError, RedLock, type RedLockHandle } from '../../lib';
import { restartNode, startTopology, stopTopology, type RunningTopology } from '../../scripts/redis-topology';
import { PRIVATE_PORTS } from '../../scripts/test-ports';
import { eventually, lockClient, quietLogger, sleep, testPrefix, type TestClient } from '../support/engine';
import { ReplyDroppingProxy } from '../support/reply-dropping-proxy';

/**
 * RedLock's known hole and its remedy: a master restarted without persistence has forgotten the holds
 * it had, and votes for a rival while the holder still counts on it. Three of a private topology's five
 * masters (quorum 2): the holder A got masters 1 and 2 (its link to master 3 was down), then master 2
 * restarts empty, and a rival B asks. Without `restartQuarantine` B gets masters 2 and 3, a quorum:
 * the lock is granted twice. With it, master 2 may not vote until it has been up that long.
 */
describe('RedLock: a master restarted empty (restartQuarantine)', () => {
  const prefix = testPrefix();
  let topology: RunningTopology | undefined;
  const opened: TestClient[] = [];
  const clientsOn = async (ports: number[]): Promise<TestClient[]> => {
    const clients = ports.map((port) => lockClient({ port, keyPrefix: prefix, operationTimeout: 1_000 }));
    opened.push(...clients);
    await Promise.all(clients.map((c) => c.redis.ping()));
    return clients;
  };
  const ports = () => topology!.masters.slice(0, 3).map((m) => m.port);
  /** Waits until each of `on` (the three masters) has been up longer than `ms` (they start with the topology). */
  const upLongerThan = async (ms: number, on = ports()): Promise<void> => {
    const admins = await clientsOn(on);
    for (const admin of admins) {
      const uptime = Number(/uptime_in_seconds:(\d+)/.exec(await admin.redis.info('server'))![1]) * 1000;
      // The library reads uptime in whole seconds, less one (see MasterHealth): two seconds of margin.
      if (uptime <= ms + 2_000) await sleep(ms + 3_000 - uptime);
    }
  };

  beforeAll(async () => {
    topology = await startTopology('multi', { basePort: PRIVATE_PORTS.redLockRestart.base });
  }, 60_000);
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((c) => c.close().catch(() => undefined)));
  });
  afterAll(async () => {
    if (topology) await stopTopology(topology);
  }, 30_000);

  /** A holds `name` on masters 1 and 2 only (its client of master 3 is closed); then master 2 restarts empty. */
  const holdThenRestart = async (name: string, restartQuarantine: number): Promise<RedLockHandle> => {
    await upLongerThan(restartQuarantine);
    const a = await clientsOn(ports());
    a[2].redis.disconnect(); // A's link to master 3 is down: its vote there is never asked
    const redLock = new RedLock(
      a.map((c) => c.locks),
      name,
      { restartQuarantine },
    );
    const held = await redLock.tryLock({ leaseTime: 20_000 });
    expect(held).not.toBeNull();
    await restartNode(topology!, ports()[1]);
    return held!;
  };

  it('without it, the restarted master votes for a rival at once: the lock is granted twice (the hole)', async () => {
    const name = 'restart-no-quarantine';
    const heldByA = await holdThenRestart(name, 0);
    const b = await clientsOn(ports());
    const rival = await new RedLock(
      b.map((c) => c.locks),
      name,
    ).tryLock({ leaseTime: 20_000 });
    // What this file's other test prevents: B holds a quorum while A has not been told it lost one.
    expect(rival).not.toBeNull();
    await rival!.release();
    await heldByA.release().catch(() => undefined);
  }, 60_000);

  it('with it, the restarted master votes for no one until it has been up that long; then the lock is free again', async () => {
    const name = 'restart-quarantine';
    const quarantine = 4_000;
    const heldByA = await holdThenRestart(name, quarantine);
    const restartedAt = performance.now();
    // B's clients connect after the restart: they never saw master 2 before, and still keep it out.
    const b = await clientsOn(ports());
    const rivalLock = new RedLock(
      b.map((c) => c.locks),
      name,
      { restartQuarantine: quarantine },
    );
    // Master 1 refuses (A holds it), master 2 is kept out, master 3 grants: one vote of the two needed.
    expect(await rivalLock.tryLock({ leaseTime: 20_000 })).toBeNull();
    // Master 3's vote for B is taken back (in the background): nothing of B is left there.
    await eventually(async () => (await b[2].redis.exists(b[2].locks.getSimpleLock(name).keys.lock)) === 0, 5_000);
    // A's holder is told its quorum is gone once its client of master 2 reconnects and finds its vote
    // missing, and gives the lock back.
    await eventually(() => heldByA.signal.aborted, 10_000);
    await heldByA.release().catch(() => undefined);
    // Still inside the quarantine: masters 1 and 3, free again, are a quorum without master 2.
    if (performance.now() - restartedAt < quarantine - 500) {
      const early = await rivalLock.tryLock({ leaseTime: 20_000 });
      expect(early).not.toBeNull();
      await early!.release();
    }
    // Availability: once master 2 has been up `restartQuarantine`, it votes again.
    const remaining = quarantine - (performance.now() - restartedAt);
    if (remaining > 0) await sleep(remaining + 2_100); // uptime is read in whole seconds, less one
    b[0].redis.disconnect(); // now a quorum needs master 2
    const later = await rivalLock.tryLock({ leaseTime: 20_000 });
    expect(later).not.toBeNull();
    expect(later!.fencingTokens.length).toBeGreaterThanOrEqual(2);
    await later!.release();
  }, 60_000);

  it('a master kept out of the vote is reported as such when too few may vote', async () => {
    const name = 'restart-quorum-error';
    await upLongerThan(5_000);
    await restartNode(topology!, ports()[1]);
    const b = await clientsOn(ports());
    b[0].redis.disconnect();
    const redLock = new RedLock(
      b.map((c) => c.locks),
      name,
      { restartQuarantine: 5_000 },
    );
    const error = await redLock.lock({ leaseTime: 5_000, waitTime: 300 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockQuorumError);
    expect((error as LockQuorumError).keptOut).toBe(1);
    expect((error as LockQuorumError).message).toMatch(/1 more kept out by restartQuarantine/);
  }, 60_000);

  it('a vote answered on a new connection (sent again after a lost reply, perhaps to a restarted server) counts as none', async () => {
    const name = 'resent-vote';
    const masters = topology!.masters;
    await upLongerThan(
      1_000,
      masters.slice(0, 4).map((m) => m.port),
    );
    // Master 1 behind a proxy whose next connection reaches another server (master 4): a restart behind
    // one address, which the client only sees as a reconnect.
    const proxy = await ReplyDroppingProxy.start(masters[0]);
    try {
      const clients = await clientsOn([proxy.port, masters[1].port, masters[2].port]);
      // Master 2 is held by someone else: its vote refuses.
      await clients[1].redis.set(clients[1].locks.getSimpleLock(name).keys.lock, 'someone-else', 'PX', 60_000);
      proxy.retarget(masters[3]);
      proxy.dropNextReply(/granted/);
      const redLock = new RedLock(
        clients.map((c) => c.locks),
        name,
        { restartQuarantine: 1_000, instanceTimeout: 3_000 },
      );
      // Master 1's grant is lost with its connection and sent again by ioredis to master 4, which grants:
      // counted, it would make a quorum with master 3's grant.
      expect(await redLock.tryLock({ leaseTime: 20_000 })).toBeNull();
      expect(proxy.dropped).toBe(1);
      // The grant the new connection answered is taken back, and so is master 3's.
      const fourth = await clientsOn([masters[3].port]);
      const key = clients[0].locks.getSimpleLock(name).keys.lock;
      await eventually(async () => (await fourth[0].redis.exists(key)) === 0, 5_000);
      await eventually(async () => (await clients[2].redis.exists(key)) === 0, 5_000);
    } finally {
      await proxy.close();
    }
  }, 60_000);

  it('a master whose start cannot be read (INFO denied to its user) does not vote, and the error says why', async () => {
    const admins = await clientsOn(ports());
    const user = `${prefix}-no-info`;
    await Promise.all(admins.map((a) => a.redis.acl('SETUSER', user, 'on', '>pw', '~*', '&*', '+@all', '-info')));
    const clients = ports().map((port) => {
      const redis = new Redis({ host: '127.0.0.1', port, username: user, password: 'pw', maxRetriesPerRequest: 1 });
      return { redis, locks: new LockClient({ redis, logger: quietLogger, keyPrefix: prefix }) };
    });
    try {
      await Promise.all(clients.map((c) => c.redis.ping()));
      const redLock = new RedLock(
        clients.map((c) => c.locks),
        'no-info',
        { restartQuarantine: 1_000 },
      );
      const error = await redLock.lock({ leaseTime: 5_000, waitTime: 300 }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(LockQuorumError);
      expect((error as LockQuorumError).keptOut).toBe(3);
      expect(String(((error as LockQuorumError).cause as Error).message)).toMatch(/INFO server failed: NOPERM/);
      // Nothing was asked of any master: no key of the lock anywhere.
      for (const a of admins) expect(await a.redis.exists(a.locks.getSimpleLock('no-info').keys.lock)).toBe(0);
    } finally {
      await Promise.all(clients.map(async (c) => (await c.locks.close(), c.redis.disconnect())));
      await Promise.all(admins.map((a) => a.redis.acl('DELUSER', user)));
    }
  }, 60_000);

  it('a wait that meets masters kept out takes the lock once their quarantine ends, without asking them before', async () => {
    const name = 'restart-wait';
    const quarantine = 2_000;
    await upLongerThan(quarantine);
    // Each master's quarantine ends `quarantine` after its own restart, so no earlier than this plus that.
    const restartsBegan = performance.now();
    for (const port of ports()) await restartNode(topology!, port);
    const b = await clientsOn(ports());
    const redLock = new RedLock(
      b.map((c) => c.locks),
      name,
      { restartQuarantine: quarantine },
    );
    const before = await Promise.all(b.map((c) => c.redis.info('commandstats')));
    const handle = await redLock.lock({ leaseTime: 10_000, waitTime: 15_000 });
    const tookMs = performance.now() - restartsBegan;
    // Not before every master has been up `quarantine` (its uptime is read in whole seconds, less one: up to 2 s
    // later).
    expect(tookMs).toBeGreaterThanOrEqual(quarantine);
    expect(tookMs).toBeLessThan(quarantine + 5_000);
    // No master was asked to vote while it was kept out: each ran the grant script for this grant only
    // (twice at most: a restarted server refuses the first EVALSHA with NOSCRIPT, and the script goes again as
    // EVAL), where a round every 250 ms for 2 s would have asked each about eight times.
    const after = await Promise.all(b.map((c) => c.redis.info('commandstats')));
    const evalCalls = (stats: string) =>
      [...stats.matchAll(/^cmdstat_(evalsha|eval):calls=(\d+)/gm)].reduce((sum, m) => sum + Number(m[2]), 0);
    for (const [i, stats] of after.entries()) expect(evalCalls(stats) - evalCalls(before[i])).toBeLessThanOrEqual(2);
    await handle.release();
  }, 60_000);

  it('the first lock on clients still connecting waits for their starts to be read, and is not refused for them', async () => {
    await upLongerThan(1_000);
    // Not connected yet when the RedLock is made and asked: their starts are read once they are.
    const fresh = ports().map((port) => lockClient({ port, keyPrefix: prefix }));
    opened.push(...fresh);
    const redLock = new RedLock(
      fresh.map((c) => c.locks),
      'fresh-clients',
      { restartQuarantine: 1_000, instanceTimeout: 3_000 },
    );
    const handle = await redLock.tryLock({ leaseTime: 10_000 });
    expect(handle).not.toBeNull();
    await handle!.release();
  }, 60_000);

  it('checks restartQuarantine before asking any master', () => {
    const clients = [lockClient({ port: ports()[0] }), lockClient({ port: ports()[2] })];
    opened.push(...clients);
    for (const bad of [-1, Number.NaN, '1000']) {
      expect(
        () =>
          new RedLock(
            clients.map((c) => c.locks),
            'bad-quarantine',
            { restartQuarantine: bad as number },
          ),
      ).toThrow(LockOptionsError);
    }
  });
});
