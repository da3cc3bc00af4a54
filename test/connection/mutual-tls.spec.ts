import { readFileSync } from 'node:fs';
import Redis from 'ioredis';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import {
  ConnectionConfigError,
  connectRedLockMasters,
  createLockClient,
  lockOptionsFromEnv,
  type ConnectionOptions,
} from '../../lib';
import { startTopology, stopTopology, type RunningTopology } from '../../scripts/redis-topology';
import { createTlsFiles } from '../../scripts/topology/tls';
import { eventually, expectReleaseToWakeAnotherClient, quietLogger } from '../support/engine';
import { sharedTopology } from '../support/topologies';
import { PRIVATE_PORTS } from '../../scripts/test-ports';

/**
 * Mutual TLS: nodes and sentinels that ask every client for a certificate signed by their CA
 * (`tls-auth-clients yes`). A client that presents the right one locks on every deployment. A
 * certificate missing or refused, or a server certificate this client does not trust or that does
 * not name the host, fails start-up at once with an error that names the setting to fix, on every
 * deployment, not after the connect deadline. Private
 * topologies on 7480-7499 (see scripts/redis-topology.ts), started one after another.
 */
const PORTS = {
  cluster: PRIVATE_PORTS.mutualTlsCluster.base,
  single: PRIVATE_PORTS.mutualTlsSingle.base,
  sentinel: PRIVATE_PORTS.mutualTlsSentinel.base,
} as const;
type Kind = keyof typeof PORTS;
/**
 * Below the connect deadline (9 s by default), which a failure that is retried would wait out, however
 * late: a sentinel case takes about 0.5 s alone, and 4.4 s once in a loaded run of the whole suite.
 */
const FAST_MS = 6_000;

describe('mutual TLS: a client certificate required everywhere', () => {
  const topologies: Partial<Record<Kind, RunningTopology>> = {};
  const files = (kind: Kind) => topologies[kind]!.tls!;

  beforeAll(async () => {
    for (const kind of Object.keys(PORTS) as Kind[]) {
      topologies[kind] = await startTopology(kind, {
        basePort: PORTS[kind],
        tls: true,
        tlsClientAuth: true,
        name: `mutual-tls-${kind}`,
      });
    }
  }, 120_000);

  afterAll(async () => {
    await Promise.all(Object.values(topologies).map((t) => stopTopology(t)));
  });

  const trusted = (kind: Kind) => ({
    ca: readFileSync(files(kind).caFile),
    cert: readFileSync(files(kind).clientCertFile),
    key: readFileSync(files(kind).clientKeyFile),
  });

  /** A client certificate of another CA, which no node trusts (made once per kind, on first use). */
  const stranger = (kind: Kind) => {
    const other = createTlsFiles(join(topologies[kind]!.stateDir, 'stranger'), 'stranger CA');
    return {
      ca: readFileSync(files(kind).caFile),
      cert: readFileSync(other.clientCertFile),
      key: readFileSync(other.clientKeyFile),
    };
  };

  const connectionTo = (kind: Kind, tls: object, more: Partial<ConnectionOptions> = {}): ConnectionOptions => {
    const t = topologies[kind]!;
    switch (kind) {
      case 'single':
        return { type: 'single', ...t.masters[0], tls, ...more } as ConnectionOptions;
      case 'sentinel':
        return {
          type: 'sentinel',
          sentinels: t.sentinels,
          masterName: t.sentinelMasterName!,
          tls,
          ...more,
        } as ConnectionOptions;
      case 'cluster':
        return { type: 'cluster', nodes: t.masters, tls, ...more } as ConnectionOptions;
    }
  };

  const kinds = Object.keys(PORTS) as Kind[];

  it.each(kinds)(
    '%s: with its certificate a client locks, and a release wakes a waiter at once',
    async (kind) => {
      const keyPrefix = `mtls-${randomUUID().slice(0, 8)}`;
      await expectReleaseToWakeAnotherClient(() =>
        createLockClient({ connection: connectionTo(kind, trusted(kind)), keyPrefix, logger: quietLogger }),
      );
    },
    60_000,
  );

  /** Start-up fails fast with ConnectionConfigError; returns its message. */
  const refusedStartUp = async (connection: ConnectionOptions): Promise<string> => {
    const startedAt = Date.now();
    let failure: unknown;
    try {
      const client = await createLockClient({ connection, logger: quietLogger });
      await client.close();
    } catch (error) {
      failure = error;
    }
    expect(failure).toBeInstanceOf(ConnectionConfigError);
    expect(Date.now() - startedAt).toBeLessThan(FAST_MS);
    return (failure as Error).message;
  };

  const refusals: [string, (kind: Kind) => object, RegExp][] = [
    [
      'no client certificate',
      (kind) => ({ ca: readFileSync(files(kind).caFile) }),
      /requires a client certificate.*REDIS_TLS_CERT_FILE.*certificate required/,
    ],
    ['a certificate of another CA', stranger, /refused the client certificate.*unknown ca/],
    [
      'no trust in the server certificate',
      (kind) => ({ cert: trusted(kind).cert, key: trusted(kind).key }),
      /not signed by a CA this client trusts.*REDIS_TLS_CA_FILE.*self-signed certificate/,
    ],
  ];
  const refusalCases = kinds.flatMap((kind) =>
    refusals.map(([what, tls, message]) => [kind, what, tls, message] as const),
  );

  it.each(refusalCases)('%s, %s: start-up fails at once, naming the setting', async (kind, _what, tls, message) => {
    expect(await refusedStartUp(connectionTo(kind, tls(kind)))).toMatch(message);
  });

  it('sentinel: sentinels that refuse a client without a certificate are named as such', async () => {
    const connection = connectionTo('sentinel', trusted('sentinel'), {
      sentinelTls: { ca: readFileSync(files('sentinel').caFile) },
    });
    expect(await refusedStartUp(connection)).toMatch(
      /requires a client certificate.*\(to the sentinels: .*sentinelTls/,
    );
  });

  it('sentinel: a master that refuses a client without a certificate, behind sentinels that take it, is named', async () => {
    const connection = connectionTo(
      'sentinel',
      { ca: readFileSync(files('sentinel').caFile) },
      {
        sentinelTls: trusted('sentinel'),
      },
    );
    const message = await refusedStartUp(connection);
    expect(message).toMatch(/requires a client certificate.*certificate required/);
    expect(message).not.toMatch(/to the sentinels/);
  });

  it('RedLock: masters that refuse a client without a certificate fail start-up at once, each named', async () => {
    // Two of three refuse, so start-up waits for their answers. (With one, the other two are a majority, and
    // start-up waits REDLOCK_STRAGGLER_GRACE_MS for the third: CI, loaded, once heard its refusal after that.)
    const withoutCertificate = () => connectionTo('single', { ca: readFileSync(files('single').caFile) });
    const masters = [connectionTo('single', trusted('single')), withoutCertificate(), withoutCertificate()];
    const startedAt = Date.now();
    const failure = await connectRedLockMasters(masters, { logger: quietLogger }).then(
      async (clients) => {
        await Promise.all(clients.map((c) => c.close()));
        return undefined;
      },
      (error: unknown) => error,
    );
    expect(failure).toBeInstanceOf(ConnectionConfigError);
    expect(Date.now() - startedAt).toBeLessThan(FAST_MS);
    expect((failure as ConnectionConfigError).problems).toEqual([
      expect.stringMatching(/^RedLock master .*requires a client certificate/),
      expect.stringMatching(/^RedLock master .*requires a client certificate/),
    ]);
  });

  it('single, a client to a host its certificate does not name: start-up fails at once, naming tls.servername', async () => {
    const connection = {
      type: 'single',
      host: 'localhost',
      port: topologies.single!.masters[0].port,
      tls: trusted('single'),
    };
    expect(await refusedStartUp(connection as ConnectionOptions)).toMatch(/does not name the host.*tls\.servername/);
  });

  it('TLS to a server that speaks plain text fails start-up soon, saying so, not after the connect deadline', async () => {
    const plain = sharedTopology('single').masters[0];
    const startedAt = Date.now();
    const failure = await createLockClient({
      connection: { type: 'single', ...plain, tls: true },
      logger: quietLogger,
    }).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(ConnectionConfigError);
    expect((failure as Error).message).toMatch(/does not speak TLS on this port: drop tls/);
    expect(Date.now() - startedAt).toBeLessThan(6_000); // a TLS handshake that never ends costs 2 s of probing
  });

  it('a client certificate the server stops trusting while the client runs: health and a warning say so, and it recovers once trusted again', async () => {
    const { masters, tls } = topologies.single!;
    const admin = new Redis({ ...masters[0], tls: trusted('single'), lazyConnect: true });
    const warnings: string[] = [];
    const locks = await createLockClient({
      connection: connectionTo('single', trusted('single')),
      operationTimeout: 1_000,
      logger: { warn: (message: string) => warnings.push(message), error: () => undefined },
    });
    const otherCa = createTlsFiles(join(topologies.single!.stateDir, 'rotated'), 'rotated CA').caFile;
    try {
      await admin.connect();
      expect((await locks.health()).healthy).toBe(true);
      // The server's CA for client certificates is rotated; our connections are cut and must reconnect.
      await admin.config('SET', 'tls-ca-cert-file', otherCa);
      await admin.client('KILL', 'TYPE', 'normal', 'SKIPME', 'yes');
      await eventually(async () => {
        const { redis } = await locks.health();
        return !redis.healthy && /refused the client certificate/.test(redis.connectionError ?? '');
      }, 15_000);
      // Health reads the refusal of any of the client's connections (the subscriber's may come first);
      // the warning comes with the lock connection's own next reconnect attempt.
      await eventually(async () => warnings.length > 0, 15_000);
      expect(warnings.join('\n')).toMatch(
        /refuses the lock connection as it reconnects: .*refused the client certificate/,
      );
      await admin.config('SET', 'tls-ca-cert-file', tls!.caFile);
      await eventually(async () => (await locks.health()).healthy, 15_000);
      expect((await locks.health()).redis.connectionError).toBeUndefined();
    } finally {
      await admin.config('SET', 'tls-ca-cert-file', tls!.caFile).catch(() => undefined);
      admin.disconnect();
      await locks.close();
    }
  }, 60_000);

  it('from the environment: REDIS_TLS_CERT_FILE and REDIS_TLS_KEY_FILE present the certificate; without them start-up fails at once', async () => {
    const { caFile, clientCertFile, clientKeyFile } = files('single');
    const env = { REDIS_URL: `rediss://127.0.0.1:${topologies.single!.masters[0].port}`, REDIS_TLS_CA_FILE: caFile };
    const client = await createLockClient({
      ...lockOptionsFromEnv({ ...env, REDIS_TLS_CERT_FILE: clientCertFile, REDIS_TLS_KEY_FILE: clientKeyFile }),
      logger: quietLogger,
    });
    try {
      const held = await client.getLock(`env-${randomUUID()}`).lock({ leaseTime: 5_000 });
      expect(await held.release()).toBe('released');
    } finally {
      await client.close();
    }
    const { connection } = lockOptionsFromEnv(env);
    expect(await refusedStartUp(connection as ConnectionOptions)).toMatch(/requires a client certificate/);
  });
});
