import { readFileSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import Redis from 'ioredis';
import {
  ConnectionConfigError,
  connectRedLockMasters,
  createLockClient,
  RedisUnavailableError,
  type ConnectionOptions,
} from '../../lib';
import { startTopology, stopNode, stopTopology, type RunningTopology } from '../../scripts/redis-topology';
import { eventually, expectReleaseToWakeAnotherClient, quietLogger, sleep } from '../support/engine';
import { sharedTopology } from '../support/topologies';
import { startWorker } from '../support/workers';
import { PRIVATE_PORTS } from '../../scripts/test-ports';

/**
 * Every deployment as managed Redis offers it: nodes and sentinels that speak TLS only, with a
 * certificate of a private CA, and require a password. Credentials or TLS settings that do not fit
 * fail start-up with an error that says what to fix. Private topologies on 7450-7479 (see
 * scripts/redis-topology.ts), started one after another to spare a loaded machine.
 */
const PORTS = {
  single: PRIVATE_PORTS.managedSingle.base,
  sentinel: PRIVATE_PORTS.managedSentinel.base,
  cluster: PRIVATE_PORTS.managedCluster.base,
} as const;
type Kind = keyof typeof PORTS;
const PASSWORD = 's3cret pass/+'; // a space and URL-reserved characters, as generated passwords have

describe('managed Redis: TLS only, a password everywhere', () => {
  const topologies: Partial<Record<Kind, RunningTopology>> = {};
  const topology = (kind: Kind) => topologies[kind]!;
  /** Each topology has a CA of its own. */
  const caFile = (kind: Kind) => topology(kind).tls!.caFile;
  const tls = (kind: Kind) => ({ ca: readFileSync(caFile(kind)) });
  const hostPorts = (list: { port: number }[]) => list.map((a) => `127.0.0.1:${a.port}`).join(',');

  beforeAll(async () => {
    for (const kind of Object.keys(PORTS) as Kind[]) {
      topologies[kind] = await startTopology(kind, {
        basePort: PORTS[kind],
        tls: true,
        password: PASSWORD,
        name: `managed-${kind}`,
      });
    }
  }, 120_000);

  afterAll(async () => {
    await Promise.all(Object.values(topologies).map((t) => stopTopology(t)));
  });

  const single = (more: Partial<ConnectionOptions> = {}) =>
    ({
      type: 'single',
      ...topology('single').masters[0],
      tls: tls('single'),
      password: PASSWORD,
      ...more,
    }) as ConnectionOptions;
  const sentinel = (more: Partial<ConnectionOptions> = {}) =>
    ({
      type: 'sentinel',
      sentinels: topology('sentinel').sentinels,
      masterName: topology('sentinel').sentinelMasterName!,
      tls: tls('sentinel'),
      password: PASSWORD,
      sentinelPassword: PASSWORD,
      ...more,
    }) as ConnectionOptions;
  const cluster = (more: Partial<ConnectionOptions> = {}) =>
    ({
      type: 'cluster',
      nodes: topology('cluster').masters,
      tls: tls('cluster'),
      password: PASSWORD,
      ...more,
    }) as ConnectionOptions;

  const deployments: [string, () => ConnectionOptions][] = [
    ['single', () => single()],
    [
      'single, by rediss:// URL',
      () => ({
        type: 'single',
        url: `rediss://:${encodeURIComponent(PASSWORD)}@127.0.0.1:${topology('single').masters[0].port}`,
        tls: tls('single'),
      }),
    ],
    [
      'master-slave',
      () => ({
        type: 'master-slave',
        master: topology('sentinel').masters[0],
        replicas: topology('sentinel').replicas,
        tls: tls('sentinel'),
        password: PASSWORD,
      }),
    ],
    ['sentinel', () => sentinel()],
    ['cluster', () => cluster()],
  ];

  it.each(deployments)(
    '%s: locks, and a release wakes a waiter of another client at once',
    async (_label, connection) => {
      const keyPrefix = `managed-${randomUUID().slice(0, 8)}`;
      await expectReleaseToWakeAnotherClient(() =>
        createLockClient({ connection: connection(), keyPrefix, logger: quietLogger }),
      );
    },
    60_000,
  );

  it.each([
    [
      'master-slave, rediss:// URL with the password',
      () => ({
        REDIS_DEPLOY_TYPE: 'master-slave',
        REDIS_URL: `rediss://:${encodeURIComponent(PASSWORD)}@127.0.0.1:${topology('sentinel').masters[0].port}`,
        REDIS_REPLICAS: hostPorts(topology('sentinel').replicas),
        NODE_EXTRA_CA_CERTS: caFile('sentinel'),
      }),
    ],
    [
      'sentinel, REDIS_TLS, REDIS_PASSWORD and REDIS_SENTINEL_PASSWORD',
      () => ({
        REDIS_DEPLOY_TYPE: 'sentinel',
        REDIS_SENTINELS: hostPorts(topology('sentinel').sentinels),
        REDIS_SENTINEL_MASTER: topology('sentinel').sentinelMasterName!,
        REDIS_TLS: 'true',
        REDIS_PASSWORD: PASSWORD,
        REDIS_SENTINEL_PASSWORD: PASSWORD,
        NODE_EXTRA_CA_CERTS: caFile('sentinel'),
      }),
    ],
    [
      'cluster, REDIS_TLS_CA_FILE and REDIS_PASSWORD',
      () => ({
        REDIS_DEPLOY_TYPE: 'cluster',
        REDIS_NODES: hostPorts(topology('cluster').masters),
        REDIS_TLS_CA_FILE: caFile('cluster'),
        REDIS_PASSWORD: PASSWORD,
      }),
    ],
  ])(
    '%s: an application configured by environment variables locks',
    async (_label, env) => {
      const worker = startWorker('env-lock.ts', {
        ...env(),
        REDIS_LOCK_PREFIX: `managed-env-${randomUUID().slice(0, 8)}`,
      });
      const result = (await worker.result) as { fencingToken: number; outcome: string };
      expect(result.outcome).toBe('released');
      expect(result.fencingToken).toBeGreaterThan(0);
    },
    60_000,
  );

  const refused: [string, () => ConnectionOptions, RegExp][] = [
    [
      'a wrong password',
      () => single({ password: 'wrong' }),
      /check username and password \(REDIS_USERNAME, REDIS_PASSWORD\); Redis said: WRONGPASS/,
    ],
    ['no password', () => single({ password: undefined }), /requires a password: give password.*Redis said: NOAUTH/],
    [
      'a wrong password in the URL',
      () => ({
        type: 'single',
        url: `rediss://:wrong@127.0.0.1:${topology('single').masters[0].port}`,
        tls: tls('single'),
      }),
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
    ['a wrong password on a Cluster', () => cluster({ password: 'wrong' }), /check username and password.*WRONGPASS/],
    ['no password on a Cluster', () => cluster({ password: undefined }), /requires a password.*NOAUTH/],
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

  it('a password changed on the server while the client runs: health and one warning name it; it recovers once the password is back', async () => {
    const master = topology('single').masters[0];
    const admin = new Redis({ ...master, tls: tls('single'), password: PASSWORD, lazyConnect: true });
    const warnings: string[] = [];
    const logger = { warn: (message: string) => warnings.push(message), error: () => undefined };
    const locks = await createLockClient({ connection: single(), operationTimeout: 1_000, logger });
    try {
      await admin.connect();
      await admin.config('SET', 'requirepass', 'rotated');
      await admin.client('KILL', 'TYPE', 'normal', 'SKIPME', 'yes'); // our connections reconnect with the old one
      await eventually(async () => {
        const { redis } = await locks.health();
        return !redis.healthy && /refused the username and password.*WRONGPASS/.test(redis.connectionError ?? '');
      }, 15_000);
      await sleep(1_500); // a few more reconnect attempts, each refused
      await admin.config('SET', 'requirepass', PASSWORD);
      await eventually(async () => (await locks.health()).healthy, 15_000);
      const refusals = warnings.filter((w) => /refuses the lock connection as it reconnects: .*WRONGPASS/.test(w));
      expect(refusals).toHaveLength(1); // once, not once per attempt
    } finally {
      await admin.config('SET', 'requirepass', PASSWORD).catch(() => undefined);
      admin.disconnect();
      await locks.close();
    }
  }, 60_000);

  it('RedLock: a master that refuses the credentials fails start-up, though a majority answers', async () => {
    const [a, b] = sharedTopology('multi').masters;
    const started = Date.now();
    const error = await connectRedLockMasters(
      [{ type: 'single', ...a }, { type: 'single', ...b }, single({ password: 'wrong' })],
      { operationTimeout: 5_000, logger: quietLogger },
    ).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConnectionConfigError);
    const port = topology('single').masters[0].port;
    expect((error as ConnectionConfigError).problems).toEqual([
      expect.stringMatching(new RegExp(`^RedLock master 127\\.0\\.0\\.1:${port}: .*WRONGPASS`)),
    ]);
    expect(Date.now() - started).toBeLessThan(3_000);
  });

  it('sentinel: sentinelTls false is honoured (TLS to the nodes, plain to the sentinels, which here refuse it)', async () => {
    const started = Date.now();
    const error = await createLockClient({
      connection: sentinel({ sentinelTls: false }),
      operationTimeout: 1_000,
      logger: quietLogger,
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RedisUnavailableError);
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it('tls or sentinelTls that is neither a boolean nor TLS options is refused before connecting, by name', async () => {
    const error = await createLockClient({
      connection: sentinel({ tls: 'true' as unknown as boolean, sentinelTls: 1 as unknown as boolean }),
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConnectionConfigError);
    expect((error as ConnectionConfigError).problems).toEqual([
      'tls must be true, false or Node TLS options (an object); got "true"',
      'sentinelTls must be true, false or Node TLS options (an object); got 1',
    ]);
  });

  it('the nodes take nothing but TLS: a plain connection is refused', async () => {
    const plain = new Redis({
      ...topology('single').masters[0],
      password: PASSWORD,
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

  // Last: it moves the sentinel topology's master.
  it('sentinel: after a failover, locks are taken on the promoted replica, over TLS and with the same credentials', async () => {
    const locks = await createLockClient({
      connection: sentinel(),
      keyPrefix: `managed-failover-${randomUUID().slice(0, 8)}`,
      operationTimeout: 5_000,
      logger: quietLogger,
    });
    try {
      await (await locks.getLock('before').lock()).release();
      const oldMaster = topology('sentinel').masters[0].port;
      await stopNode(topology('sentinel'), oldMaster);
      const handle = await locks.getLock('after').lock({ waitTime: 30_000, leaseTime: 10_000 });
      expect(await handle.release()).toBe('released');
      // A TLS-only node reports its TLS port as tcp_port.
      expect(await (locks.redis as Redis).info('server')).not.toContain(`tcp_port:${oldMaster}\r`);
    } finally {
      await locks.close();
    }
  }, 60_000);
});
