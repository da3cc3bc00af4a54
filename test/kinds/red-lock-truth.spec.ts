import type { DataPoint, Histogram } from '@opentelemetry/sdk-metrics';
import { RedLock, type LockClientEvents, type LockTelemetryOptions } from '../../lib';
import { lockClient, sleep, testPrefix, type TestClient } from '../support/engine';
import { testSdk } from '../support/telemetry';
import { startTopology, stopTopology, type RunningTopology } from '../../scripts/redis-topology';
import { PRIVATE_PORTS } from '../../scripts/test-ports';

type Point = DataPoint<number | Histogram>;

/**
 * What a RedLock reports (validity, validUntil, its signal, metrics, events) is what its masters and
 * its holder have: checked against the five independent masters themselves.
 */
describe('RedLock reports the truth', () => {
  const prefix = testPrefix();
  // Masters of its own: a test here pauses writes on three of them (CLIENT PAUSE), which the suites
  // running meanwhile on the shared ones would feel as an outage.
  let topology: RunningTopology | undefined;
  beforeAll(async () => {
    topology = await startTopology('multi', { basePort: PRIVATE_PORTS.redLockTruth.base });
  }, 60_000);
  afterAll(async () => {
    if (topology) await stopTopology(topology);
  }, 30_000);
  const ports = () => topology!.masters.map((m) => m.port);
  const clientsFor = async (
    options: { watchdogTimeout?: number; telemetry?: LockTelemetryOptions } = {},
  ): Promise<TestClient[]> => {
    const clients = ports().map((port) => lockClient({ port, keyPrefix: prefix, operationTimeout: 500, ...options }));
    // Connected first: a vote bounded in time must not lose its round to a slow connect on a busy machine.
    await Promise.all(clients.map((c) => c.redis.ping()));
    return clients;
  };
  const closeAll = (clients: TestClient[]) => Promise.all(clients.map((c) => c.close().catch(() => undefined)));
  const pttls = (clients: TestClient[], name: string) =>
    Promise.all(clients.map((c) => c.redis.pttl(c.locks.getSimpleLock(name).keys.lock)));

  afterEach(() => jest.restoreAllMocks());

  it('a watchdog-renewed RedLock keeps a positive validity, moved forward by the renewals, while the masters hold it', async () => {
    const clients = await clientsFor({ watchdogTimeout: 1_500 });
    try {
      const handle = await new RedLock(
        clients.map((c) => c.locks),
        'renewed',
      ).lock();
      // Three leases long: renewed (every 500 ms) all along.
      for (let i = 0; i < 9; i++) {
        await sleep(500);
        const held = (await pttls(clients, 'renewed')).filter((ttl) => ttl > 0);
        expect(held.length).toBeGreaterThanOrEqual(3);
        expect(handle.signal.aborted).toBe(false);
        expect(handle.validity).toBeGreaterThan(0);
        // Never more than what a quorum of the masters still has.
        expect(handle.validity).toBeLessThanOrEqual(held.sort((a, b) => b - a)[2] + 100);
        expect(handle.validUntil).toBeGreaterThan(Date.now());
      }
      // 'pending' when a master took longer than the instance timeout (75 ms here) on a busy machine.
      expect(['released', 'pending']).toContain(await handle.release());
      expect(handle.validity).toBe(0);
    } finally {
      await closeAll(clients);
    }
  }, 30_000);

  it('renewals that do not land on a quorum leave the validity where it was, and the signal aborts when it ends', async () => {
    const clients = await clientsFor({ watchdogTimeout: 1_500 });
    try {
      const handle = await new RedLock(
        clients.map((c) => c.locks),
        'unrenewed',
      ).lock();
      await sleep(700); // one renewal landed everywhere
      // Three masters take no writes (renewals) for 3 s: only two renew, short of the quorum of three.
      await Promise.all(clients.slice(0, 3).map((c) => c.redis.call('CLIENT', 'PAUSE', '3000', 'WRITE')));
      const pausedAt = Date.now();
      const before = handle.validUntil;
      while (!handle.signal.aborted && Date.now() - pausedAt < 2_500) {
        // Not moved forward by a renewal (a renewal moves it by about its period, 500 ms). Each master's
        // renewal is sent on its own timer: a first renewal sent before the pause and answered late on
        // a loaded machine still moves it by the spread of those sends (32 ms seen in CI), truthfully.
        expect(handle.validUntil).toBeLessThanOrEqual(before + 200);
        await sleep(50);
      }
      expect(handle.signal.aborted).toBe(true);
      expect(Date.now() - pausedAt).toBeLessThan(2_000); // at the end of the validity: lease 1.5 s
      expect(handle.validity).toBe(0);
    } finally {
      await Promise.all(clients.map((c) => c.redis.call('CLIENT', 'UNPAUSE').catch(() => undefined)));
      await closeAll(clients);
    }
  }, 30_000);

  it('an aborted signal is refused with its reason and no master is granted anything (lock, tryLock, withLock)', async () => {
    const clients = await clientsFor();
    try {
      const redLock = new RedLock(
        clients.map((c) => c.locks),
        'aborted-before',
      );
      const reason = new Error('caller gave up');
      const signal = AbortSignal.abort(reason);
      let ran = false;
      const calls = [
        () => redLock.lock({ signal, leaseTime: 10_000 }),
        () => redLock.tryLock({ signal, leaseTime: 10_000, waitTime: 1_000 }),
        () => redLock.withLock(() => (ran = true), { signal, leaseTime: 10_000 }),
      ];
      for (const call of calls) {
        const outcome = await call().then(
          async (handle) => {
            if (handle && typeof handle === 'object') await handle.release();
            return 'acquired';
          },
          (error: unknown) => error,
        );
        expect(outcome).toBe(reason);
      }
      expect(ran).toBe(false);
      expect((await pttls(clients, 'aborted-before')).every((ttl) => ttl === -2)).toBe(true);
    } finally {
      await closeAll(clients);
    }
  });

  it("extend() to a longer lease counts that lease's drift allowance, not the first lease's", async () => {
    const clients = await clientsFor();
    try {
      const redLock = new RedLock(
        clients.map((c) => c.locks),
        'extended-drift',
      );
      const handle = await redLock.lock({ leaseTime: 2_000, waitTime: 5_000 });
      await handle.extend(100_000);
      // lease - drift at most, with drift = 1 % of the lease + 2 ms (1 002 ms), not 22 ms.
      expect(handle.validity).toBeLessThanOrEqual(100_000 - 1_002);
      expect(handle.validity).toBeGreaterThan(90_000);
      expect(['released', 'pending']).toContain(await handle.release());
    } finally {
      await closeAll(clients);
    }
  });

  it('a backward wall-clock step changes neither the validity nor when the signal aborts', async () => {
    const clients = await clientsFor();
    try {
      const handle = await new RedLock(
        clients.map((c) => c.locks),
        'step-back',
      ).lock({ leaseTime: 1_000 });
      const realNow = Date.now.bind(Date);
      const wallBefore = handle.validUntil;
      jest.spyOn(Date, 'now').mockImplementation(() => realNow() - 2_000); // an NTP step back by 2 s
      expect(handle.validity).toBeLessThanOrEqual(1_000);
      // validUntil is a wall-clock time: it moves with the wall clock, and by nothing else.
      expect(Math.abs(handle.validUntil - (wallBefore - 2_000))).toBeLessThan(150);
      await sleep(1_300);
      expect(await pttls(clients, 'step-back')).toEqual([-2, -2, -2, -2, -2]); // every master let it go
      expect(handle.validity).toBe(0);
      expect(handle.signal.aborted).toBe(true);
    } finally {
      jest.restoreAllMocks();
      await closeAll(clients);
    }
  }, 30_000);

  it('a forward wall-clock step does not end a validity the masters still grant', async () => {
    const clients = await clientsFor();
    try {
      const handle = await new RedLock(
        clients.map((c) => c.locks),
        'step-forward',
      ).lock({ leaseTime: 3_000 });
      const realNow = Date.now.bind(Date);
      jest.spyOn(Date, 'now').mockImplementation(() => realNow() + 5_000);
      await sleep(200);
      expect((await pttls(clients, 'step-forward')).every((ttl) => ttl > 2_000)).toBe(true);
      expect(handle.validity).toBeGreaterThan(1_500);
      expect(handle.signal.aborted).toBe(false);
      // An extension measured across the step too.
      await handle.extend(3_000);
      expect(handle.validity).toBeGreaterThan(2_500);
      expect(handle.validity).toBeLessThanOrEqual(3_000);
      expect(await handle.release()).toBe('released');
    } finally {
      jest.restoreAllMocks();
      await closeAll(clients);
    }
  }, 30_000);

  it('telemetry and events: one acquisition per RedLock grant or timeout, kind redlock, under its label', async () => {
    const sdk = testSdk();
    const clients = await clientsFor({
      telemetry: { meterProvider: sdk.meterProvider, tracerProvider: sdk.tracerProvider },
    });
    const events: { client: number; event: string; kind?: string; label?: string }[] = [];
    clients.forEach((c, client) => {
      for (const event of ['acquired', 'waiting', 'timedOut', 'released'] as const) {
        c.locks.on(event, (e: LockClientEvents[typeof event][0]) =>
          events.push({ client, event, kind: e.kind, label: e.label }),
        );
      }
    });
    try {
      const masters = clients.map((c) => c.locks);
      const label = 'payout:{id}';
      for (let i = 0; i < 3; i++) {
        await new RedLock(masters, `payout:${i}`).withLock(() => sleep(10), { label, leaseTime: 5_000 });
      }
      const held = await new RedLock(masters, 'payout:busy').lock({ label, leaseTime: 5_000 });
      expect(await new RedLock(masters, 'payout:busy').tryLock({ label, leaseTime: 5_000 })).toBeNull();
      const waited = new RedLock(masters, 'payout:busy').lock({ label, leaseTime: 5_000, waitTime: 10_000 });
      await sleep(200);
      await held.release();
      await (await waited).release();

      const { resourceMetrics } = await sdk.reader.collect();
      const points = resourceMetrics.scopeMetrics
        .flatMap((s) => s.metrics)
        .filter((m) => m.descriptor.name === 'lock.acquisitions')
        .flatMap((m) => m.dataPoints as Point[]);
      const count = (outcome: string, kind: string) =>
        points
          .filter((p) => p.attributes['lock.outcome'] === outcome && p.attributes['lock.kind'] === kind)
          .reduce((sum, p) => sum + (p.value as number), 0);
      expect(count('acquired', 'redlock')).toBe(5);
      expect(count('timed_out', 'redlock')).toBe(1);
      expect(points.every((p) => p.attributes['lock.kind'] === 'redlock')).toBe(true); // no per-master votes
      expect(points.every((p) => p.attributes['lock.name'] === label)).toBe(true);

      const seen = (event: string) => events.filter((e) => e.event === event);
      expect(events.every((e) => e.client === 0 && e.kind === 'redlock' && e.label === label)).toBe(true);
      expect(seen('acquired')).toHaveLength(5);
      expect(seen('timedOut')).toHaveLength(1);
      expect(seen('waiting')).toHaveLength(1);
      expect(seen('released')).toHaveLength(5);
    } finally {
      await closeAll(clients);
      await sdk.shutdown();
    }
  }, 30_000);
});
