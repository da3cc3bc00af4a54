import { randomUUID } from 'node:crypto';
import Redis from 'ioredis';
import { ConnectionConfigError, createLockClient, type ConnectionOptions, type LockClient } from '../../lib';
import { startTopology, stopNode, stopTopology, type RunningTopology } from '../../scripts/redis-topology';
import { quietLogger } from '../support/engine';
import { startWorker } from '../support/workers';

/**
 * Every deployment whose nodes and sentinels require a password, as managed Redis does; and
 * credentials Redis refuses, which fail start-up at once with a ConnectionConfigError naming what to
 * fix, not after the connect deadline with "check that Redis is reachable". Private topologies on
 * 7490-7519 (see scripts/redis-topology.ts).
 */
const PORTS = { single: 7490, sentinel: 7500, cluster: 7510 } as const;
const PASSWORD = 's3cret pass/+'; // a space and URL-reserved characters, as generated passwords have

describe('deployments that require a password', () => {
  const topologies: Partial<Record<keyof typeof PORTS, RunningTopology>> = {};

  beforeAll(async () => {
    const failed = await Promise.all(
      (Object.keys(PORTS) as (keyof typeof PORTS)[]).map(async (kind) => {
        topologies[kind] = await startTopology(kind, {
          basePort: PORTS[kind],
          password: PASSWORD,
          name: `auth-${kind}`,
        });
      }),
    ).then(
      () => undefined,
      (error: unknown) => error,
    );
    if (failed) throw failed;
  }, 120_000);

  afterAll(async () => {
    await Promise.all(Object.values(topologies).map((t) => stopTopology(t)));
  });

  const single = () => topologies.single!.masters[0];
  const sentinel = (more: Partial<ConnectionOptions> = {}) =>
    ({
      type: 'sentinel',
      sentinels: topologies.sentinel!.sentinels,
      masterName: topologies.sentinel!.sentinelMasterName!,
      password: PASSWORD,
      sentinelPassword: PASSWORD,
      ...more,
    }) as ConnectionOptions;
  const cluster = (password?: string): ConnectionOptions => ({
    type: 'cluster',
    nodes: topologies.cluster!.masters,
    password,
  });

  const granted: [string, () => ConnectionOptions][] = [
    ['single', () => ({ type: 'single', ...single(), password: PASSWORD })],
    [
      'single, by URL',
      () => ({ type: 'single', url: `redis://:${encodeURIComponent(PASSWORD)}@127.0.0.1:${single().port}` }),
    ],
    ['master-slave', () => ({ type: 'master-slave', master: single(), replicas: [], password: PASSWORD })],
    ['sentinel', () => sentinel()],
    ['cluster', () => cluster(PASSWORD)],
  ];

  it.each(granted)(
    '%s: locks, and a release wakes a waiter of another client at once',
    async (_label, connection) => {
      const keyPrefix = `auth-${randomUUID().slice(0, 8)}`;
      const open = () => createLockClient({ connection: connection(), keyPrefix, logger: quietLogger });
      const clients: LockClient[] = [];
      try {
        const [a, b] = [await open(), await open()];
        clients.push(a, b);
        const held = await a.getLock('auth').lock({ leaseTime: 30_000 });
        const waiting = b.getLock('auth').lock({ waitTime: 20_000 });
        await new Promise((resolve) => setTimeout(resolve, 300)); // parked on its channel
        const releasedAt = Date.now();
        expect(await held.release()).toBe('released');
        await (await waiting).release();
        expect(Date.now() - releasedAt).toBeLessThan(1_000); // woken by the message, not the 30 s lease
      } finally {
        await Promise.all(clients.map((c) => c.close()));
      }
    },
    60_000,
  );

  const refused: [string, () => ConnectionOptions, RegExp][] = [
    [
      'a wrong password',
      () => ({ type: 'single', ...single(), password: 'wrong' }),
      /check username and password \(REDIS_USERNAME, REDIS_PASSWORD\); Redis said: WRONGPASS/,
    ],
    ['no password', () => ({ type: 'single', ...single() }), /requires a password: give password.*Redis said: NOAUTH/],
    [
      'a wrong password in the URL',
      () => ({ type: 'single', url: `redis://:wrong@127.0.0.1:${single().port}` }),
      /WRONGPASS/,
    ],
    [
      'a wrong sentinelPassword',
      () => sentinel({ sentinelPassword: 'wrong' }),
      /The sentinels refused the credentials: check sentinelUsername and sentinelPassword.*WRONGPASS/,
    ],
    ['no sentinelPassword', () => sentinel({ sentinelPassword: undefined }), /The sentinels refused.*NOAUTH/],
    [
      'a wrong password behind right sentinels',
      () => sentinel({ password: 'wrong' }),
      /check username and password.*WRONGPASS/,
    ],
    ['a wrong password on a Cluster', () => cluster('wrong'), /check username and password.*WRONGPASS/],
    ['no password on a Cluster', () => cluster(), /requires a password.*NOAUTH/],
  ];

  it.each(refused)(
    '%s: start-up fails at once with ConnectionConfigError saying what to fix',
    async (_label, connection, says) => {
      const started = Date.now();
      // A deadline of 15 s: a refusal is not waited out.
      const error = await createLockClient({
        connection: connection(),
        operationTimeout: 5_000,
        logger: quietLogger,
      }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ConnectionConfigError);
      expect((error as ConnectionConfigError).problems[0]).toMatch(says);
      expect(Date.now() - started).toBeLessThan(3_000);
    },
  );

  it('sentinel, configured by REDIS_* variables: an application locks with REDIS_PASSWORD and REDIS_SENTINEL_PASSWORD', async () => {
    const worker = startWorker('env-lock.ts', {
      REDIS_DEPLOY_TYPE: 'sentinel',
      REDIS_SENTINELS: topologies.sentinel!.sentinels.map((s) => `127.0.0.1:${s.port}`).join(','),
      REDIS_SENTINEL_MASTER: topologies.sentinel!.sentinelMasterName!,
      REDIS_PASSWORD: PASSWORD,
      REDIS_SENTINEL_PASSWORD: PASSWORD,
      REDIS_LOCK_PREFIX: `auth-env-${randomUUID().slice(0, 8)}`,
    });
    expect(((await worker.result) as { outcome: string }).outcome).toBe('released');
  }, 60_000);

  it('sentinel: after a failover, locks are taken on the promoted replica with the same credentials', async () => {
    const topology = topologies.sentinel!;
    const locks = await createLockClient({
      connection: sentinel(),
      keyPrefix: `auth-failover-${randomUUID().slice(0, 8)}`,
      operationTimeout: 5_000,
      logger: quietLogger,
    });
    try {
      await (await locks.getLock('before').lock()).release();
      const oldMaster = topology.masters[0].port;
      await stopNode(topology, oldMaster);
      const handle = await locks.getLock('after').lock({ waitTime: 30_000, leaseTime: 10_000 });
      expect(await handle.release()).toBe('released');
      expect(await (locks.redis as Redis).info('server')).not.toContain(`tcp_port:${oldMaster}\r`);
    } finally {
      await locks.close();
    }
  }, 60_000);
});
