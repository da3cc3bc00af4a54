import { readFileSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import Redis from 'ioredis';
import {
  ConnectionConfigError,
  createLockClient,
  RedisUnavailableError,
  type ConnectionOptions,
  type LockClient,
} from '../../lib';
import { startTopology, stopNode, stopTopology, type RunningTopology } from '../../scripts/redis-topology';
import { quietLogger } from '../support/engine';
import { startWorker } from '../support/workers';

/**
 * Every deployment over TLS, as managed Redis offers it: nodes (sentinels too) that speak TLS only,
 * with a certificate of a private CA. Private topologies on 7450-7489 (see scripts/redis-topology.ts).
 */
const PORTS = { single: 7450, sentinel: 7460, cluster: 7470, replica: 7480 } as const;

describe('TLS deployments', () => {
  const topologies: Partial<Record<keyof typeof PORTS, RunningTopology>> = {};
  /** Each topology has a CA of its own. */
  const ca = (kind: keyof typeof PORTS) => readFileSync(topologies[kind]!.tls!.caFile);

  beforeAll(async () => {
    const started = await Promise.all(
      (Object.keys(PORTS) as (keyof typeof PORTS)[]).map(async (kind) => {
        topologies[kind] = await startTopology(kind, { basePort: PORTS[kind], tls: true, name: `tls-${kind}` });
      }),
    ).then(
      () => undefined,
      (error: unknown) => error,
    );
    if (started) throw started;
  }, 120_000);

  afterAll(async () => {
    await Promise.all(Object.values(topologies).map((t) => stopTopology(t)));
  });

  const connections: [string, () => ConnectionOptions][] = [
    ['single', () => ({ type: 'single', ...topologies.single!.masters[0], tls: { ca: ca('single') } })],
    [
      'single, by rediss:// URL',
      () => ({
        type: 'single',
        url: `rediss://127.0.0.1:${topologies.single!.masters[0].port}`,
        tls: { ca: ca('single') },
      }),
    ],
    [
      'master-slave',
      () => ({
        type: 'master-slave',
        master: topologies.replica!.masters[0],
        replicas: topologies.replica!.replicas,
        tls: { ca: ca('replica') },
      }),
    ],
    [
      'sentinel',
      () => ({
        type: 'sentinel',
        sentinels: topologies.sentinel!.sentinels,
        masterName: topologies.sentinel!.sentinelMasterName!,
        tls: { ca: ca('sentinel') },
      }),
    ],
    ['cluster', () => ({ type: 'cluster', nodes: topologies.cluster!.masters, tls: { ca: ca('cluster') } })],
  ];

  it.each(connections)(
    '%s: locks, and a release wakes a waiter of another client at once',
    async (_label, connection) => {
      const keyPrefix = `tls-${randomUUID().slice(0, 8)}`;
      const open = () => createLockClient({ connection: connection(), keyPrefix, logger: quietLogger });
      const clients: LockClient[] = [];
      try {
        const [a, b] = [await open(), await open()];
        clients.push(a, b);
        const held = await a.getLock('tls').lock({ leaseTime: 30_000 });
        const waiting = b.getLock('tls').lock({ waitTime: 20_000 });
        await new Promise((resolve) => setTimeout(resolve, 300)); // parked on its channel
        const releasedAt = Date.now();
        expect(await held.release()).toBe('released');
        const next = await waiting;
        expect(Date.now() - releasedAt).toBeLessThan(1_000); // woken by the message, not the 30 s lease
        expect(next.fencingToken).toBeGreaterThan(held.fencingToken);
        expect(await next.release()).toBe('released');
      } finally {
        await Promise.all(clients.map((c) => c.close()));
      }
    },
    60_000,
  );

  it('sentinel: sentinelTls false is honoured (TLS to the nodes, plain to the sentinels, which here refuse it)', async () => {
    const started = Date.now();
    const error = await createLockClient({
      connection: {
        type: 'sentinel',
        sentinels: topologies.sentinel!.sentinels,
        masterName: topologies.sentinel!.sentinelMasterName!,
        tls: { ca: ca('sentinel') },
        sentinelTls: false,
      },
      operationTimeout: 1_000,
      logger: quietLogger,
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RedisUnavailableError);
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it.each([
    [
      'master-slave, rediss:// URL',
      () => ({
        REDIS_DEPLOY_TYPE: 'master-slave',
        REDIS_URL: `rediss://127.0.0.1:${topologies.replica!.masters[0].port}`,
        REDIS_REPLICAS: topologies.replica!.replicas.map((r) => `127.0.0.1:${r.port}`).join(','),
        NODE_EXTRA_CA_CERTS: topologies.replica!.tls!.caFile,
      }),
    ],
    [
      'sentinel, REDIS_TLS=true',
      () => ({
        REDIS_DEPLOY_TYPE: 'sentinel',
        REDIS_SENTINELS: topologies.sentinel!.sentinels.map((s) => `127.0.0.1:${s.port}`).join(','),
        REDIS_SENTINEL_MASTER: topologies.sentinel!.sentinelMasterName!,
        REDIS_TLS: 'true',
        NODE_EXTRA_CA_CERTS: topologies.sentinel!.tls!.caFile,
      }),
    ],
    [
      'cluster, REDIS_TLS=true',
      () => ({
        REDIS_DEPLOY_TYPE: 'cluster',
        REDIS_NODES: topologies.cluster!.masters.map((n) => `127.0.0.1:${n.port}`).join(','),
        REDIS_TLS: 'true',
        NODE_EXTRA_CA_CERTS: topologies.cluster!.tls!.caFile,
      }),
    ],
  ])(
    '%s: an application configured by environment variables locks over TLS',
    async (_label, env) => {
      const worker = startWorker('env-lock.ts', { ...env(), REDIS_LOCK_PREFIX: `tls-env-${randomUUID().slice(0, 8)}` });
      const result = (await worker.result) as { fencingToken: number; outcome: string };
      expect(result.outcome).toBe('released');
      expect(result.fencingToken).toBeGreaterThan(0);
    },
    60_000,
  );

  it('sentinel: after a failover over TLS, locks are taken on the promoted replica', async () => {
    const topology = topologies.sentinel!;
    const locks = await createLockClient({
      connection: {
        type: 'sentinel',
        sentinels: topology.sentinels,
        masterName: topology.sentinelMasterName!,
        tls: { ca: ca('sentinel') },
      },
      keyPrefix: `tls-failover-${randomUUID().slice(0, 8)}`,
      operationTimeout: 5_000,
      logger: quietLogger,
    });
    try {
      await (await locks.getLock('before').lock()).release();
      const oldMaster = topology.masters[0].port;
      await stopNode(topology, oldMaster);
      const handle = await locks.getLock('after').lock({ waitTime: 30_000, leaseTime: 10_000 });
      expect(await handle.release()).toBe('released');
      const info = (await (locks.redis as Redis).info('server')) as string;
      expect(info).not.toContain(`tcp_port:${oldMaster}\r`); // a TLS-only node reports its TLS port here
    } finally {
      await locks.close();
    }
  }, 60_000);

  it('tls or sentinelTls that is neither a boolean nor TLS options is refused before connecting, by name', async () => {
    const error = await createLockClient({
      connection: {
        type: 'sentinel',
        sentinels: [{ host: '127.0.0.1', port: 1 }],
        masterName: 'm',
        tls: 'true' as unknown as boolean,
        sentinelTls: 1 as unknown as boolean,
      },
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConnectionConfigError);
    expect((error as ConnectionConfigError).problems).toEqual([
      'tls must be true, false or Node TLS options (an object); got "true"',
      'sentinelTls must be true, false or Node TLS options (an object); got 1',
    ]);
  });

  it('the nodes take nothing but TLS: a plain connection is refused', async () => {
    const plain = new Redis({
      ...topologies.single!.masters[0],
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    plain.on('error', () => undefined);
    try {
      await expect(plain.connect().then(() => plain.ping())).rejects.toThrow();
    } finally {
      plain.disconnect();
    }
  });
});
