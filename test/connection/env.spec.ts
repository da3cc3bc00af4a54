import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConnectionConfigError, lockOptionsFromEnv } from '../../lib';

describe('lockOptionsFromEnv', () => {
  /** The problems lockOptionsFromEnv reports for `env` (none: it parsed). */
  const problems = (env: Record<string, string>): string[] => {
    try {
      lockOptionsFromEnv(env);
    } catch (error) {
      return [...(error as ConnectionConfigError).problems];
    }
    return [];
  };

  const good: [string, Record<string, string>, unknown][] = [
    ['defaults to a local single server', {}, { connection: { type: 'single', url: 'redis://127.0.0.1:6379' } }],
    [
      'single with URL, credentials, db, TLS and lock settings',
      {
        REDIS_URL: 'rediss://cache:6380/2',
        REDIS_USERNAME: 'app',
        REDIS_PASSWORD: 's3cret',
        REDIS_DB: '2',
        REDIS_TLS: 'true',
        REDIS_LOCK_PREFIX: 'orders',
        REDIS_LOCK_WATCHDOG_TIMEOUT: '10000',
        REDIS_LOCK_OPERATION_TIMEOUT: '1500',
        REDIS_COMMAND_TIMEOUT: '500',
      },
      {
        connection: {
          type: 'single',
          url: 'rediss://cache:6380/2',
          username: 'app',
          password: 's3cret',
          db: 2,
          tls: true,
          commandTimeout: 500,
        },
        keyPrefix: 'orders',
        watchdogTimeout: 10_000,
        operationTimeout: 1_500,
      },
    ],
    [
      'master-slave',
      {
        REDIS_DEPLOY_TYPE: 'master-slave',
        REDIS_URL: 'redis://10.0.0.1:6379',
        REDIS_REPLICAS: '10.0.0.2:6379, 10.0.0.3:6380',
      },
      {
        connection: {
          type: 'master-slave',
          master: { host: '10.0.0.1', port: 6379 },
          replicas: [
            { host: '10.0.0.2', port: 6379 },
            { host: '10.0.0.3', port: 6380 },
          ],
        },
      },
    ],
    [
      'master-slave with a rediss:// URL: TLS, unless REDIS_TLS says otherwise',
      { REDIS_DEPLOY_TYPE: 'master-slave', REDIS_URL: 'rediss://10.0.0.1:6380' },
      { connection: { type: 'master-slave', master: { host: '10.0.0.1', port: 6380 }, replicas: [], tls: true } },
    ],
    [
      'master-slave with a rediss:// URL and REDIS_TLS=false',
      { REDIS_DEPLOY_TYPE: 'master-slave', REDIS_URL: 'rediss://10.0.0.1:6380', REDIS_TLS: 'false' },
      { connection: { type: 'master-slave', master: { host: '10.0.0.1', port: 6380 }, replicas: [], tls: false } },
    ],
    [
      'sentinel with TLS to the nodes but not to the sentinels, and an ACL user of the sentinels',
      {
        REDIS_DEPLOY_TYPE: 'sentinel',
        REDIS_SENTINELS: 's1:26379',
        REDIS_SENTINEL_MASTER: 'mymaster',
        REDIS_TLS: 'true',
        REDIS_SENTINEL_TLS: 'false',
        REDIS_SENTINEL_USERNAME: 'watcher',
        REDIS_SENTINEL_PASSWORD: 'pw',
      },
      {
        connection: {
          type: 'sentinel',
          sentinels: [{ host: 's1', port: 26379 }],
          masterName: 'mymaster',
          tls: true,
          sentinelTls: false,
          sentinelUsername: 'watcher',
          sentinelPassword: 'pw',
        },
      },
    ],
    [
      'sentinel',
      { REDIS_DEPLOY_TYPE: 'sentinel', REDIS_SENTINELS: 's1:26379,s2:26379', REDIS_SENTINEL_MASTER: 'mymaster' },
      {
        connection: {
          type: 'sentinel',
          sentinels: [
            { host: 's1', port: 26379 },
            { host: 's2', port: 26379 },
          ],
          masterName: 'mymaster',
        },
      },
    ],
    [
      'cluster',
      { REDIS_DEPLOY_TYPE: 'cluster', REDIS_NODES: 'n1:7000,n2:7001,[::1]:7002' },
      {
        connection: {
          type: 'cluster',
          nodes: [
            { host: 'n1', port: 7000 },
            { host: 'n2', port: 7001 },
            { host: '::1', port: 7002 },
          ],
        },
      },
    ],
  ];

  it.each(good)('%s', (_label, env, expected) => {
    expect(stripUndefined(lockOptionsFromEnv(env))).toEqual(expected);
  });

  const bad: [string, Record<string, string>, string[]][] = [
    [
      'unknown deploy type',
      { REDIS_DEPLOY_TYPE: 'galaxy' },
      ['REDIS_DEPLOY_TYPE must be one of single, master-slave, sentinel, cluster; got "galaxy"'],
    ],
    ['malformed URL', { REDIS_URL: 'http://x:1' }, ['REDIS_URL must start with redis:// or rediss://']],
    [
      'sentinel without its addresses',
      { REDIS_DEPLOY_TYPE: 'sentinel' },
      [
        'REDIS_SENTINELS is required when REDIS_DEPLOY_TYPE=sentinel',
        'REDIS_SENTINEL_MASTER is required when REDIS_DEPLOY_TYPE=sentinel',
      ],
    ],
    [
      'every problem at once',
      {
        REDIS_DEPLOY_TYPE: 'cluster',
        REDIS_NODES: 'n1:7000,n2,n3:99999',
        REDIS_DB: 'x',
        REDIS_TLS: 'maybe',
        REDIS_LOCK_PREFIX: 'a{b}',
      },
      [
        'REDIS_NODES entry 2 ("n2") is not host:port',
        'REDIS_NODES entry 3 ("n3:99999") is not host:port',
        'REDIS_DB must be an integer >= 0; got "x"',
        'REDIS_TLS must be true or false; got "maybe"',
        'REDIS_LOCK_PREFIX must be a non-empty string without "{" or "}"',
      ],
    ],
    [
      'a sentinel TLS flag that is not a boolean',
      {
        REDIS_DEPLOY_TYPE: 'sentinel',
        REDIS_SENTINELS: 's1:26379',
        REDIS_SENTINEL_MASTER: 'm',
        REDIS_SENTINEL_TLS: 'on',
      },
      ['REDIS_SENTINEL_TLS must be true or false; got "on"'],
    ],
    [
      'master-slave without the master',
      { REDIS_DEPLOY_TYPE: 'master-slave' },
      ['REDIS_URL is required when REDIS_DEPLOY_TYPE=master-slave'],
    ],
    [
      'cluster with a db',
      { REDIS_DEPLOY_TYPE: 'cluster', REDIS_NODES: 'n1:7000', REDIS_DB: '3' },
      ['REDIS_DB cannot be used with a cluster'],
    ],
    [
      'bad watchdog timeout',
      { REDIS_LOCK_WATCHDOG_TIMEOUT: '-5' },
      ['REDIS_LOCK_WATCHDOG_TIMEOUT must be an integer in 1..2147483647; got "-5"'],
    ],
    [
      'operation timeout that is not a whole positive number',
      { REDIS_LOCK_OPERATION_TIMEOUT: '2.5s' },
      ['REDIS_LOCK_OPERATION_TIMEOUT must be an integer in 1..2147483647; got "2.5s"'],
    ],
    [
      'watchdog timeout past what a timer can wait',
      { REDIS_LOCK_WATCHDOG_TIMEOUT: '2147483648' },
      ['REDIS_LOCK_WATCHDOG_TIMEOUT must be an integer in 1..2147483647; got "2147483648"'],
    ],
  ];

  it.each(bad)('%s: one error listing every problem', (_label, env, messages) => {
    let error: unknown;
    try {
      lockOptionsFromEnv(env);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConnectionConfigError);
    expect((error as ConnectionConfigError).name).toBe('ConnectionConfigError');
    expect((error as ConnectionConfigError).problems).toHaveLength(messages.length);
    for (const message of messages) expect((error as Error).message).toContain(message);
  });

  it('REDIS_TLS_CA_FILE: TLS trusting that CA; a path that cannot be read or REDIS_TLS=false is a problem', () => {
    const dir = mkdtempSync(join(tmpdir(), 'ca-'));
    try {
      const caFile = join(dir, 'ca.crt');
      writeFileSync(caFile, '-----BEGIN CERTIFICATE-----\nnot checked here\n-----END CERTIFICATE-----\n');
      const { connection } = lockOptionsFromEnv({ REDIS_URL: 'rediss://cache:6380', REDIS_TLS_CA_FILE: caFile });
      expect((connection as { tls: { ca: Buffer } }).tls.ca).toEqual(readFileSync(caFile));
      const sentinel = lockOptionsFromEnv({
        REDIS_DEPLOY_TYPE: 'sentinel',
        REDIS_SENTINELS: 's1:26379',
        REDIS_SENTINEL_MASTER: 'm',
        REDIS_TLS_CA_FILE: caFile,
        REDIS_SENTINEL_TLS: 'true',
      }).connection as { sentinelTls: { ca: Buffer } };
      expect(sentinel.sentinelTls.ca).toEqual(readFileSync(caFile)); // the sentinels trust that CA too

      expect(problems({ REDIS_TLS_CA_FILE: join(dir, 'missing.crt') })).toEqual([
        expect.stringMatching(/^REDIS_TLS_CA_FILE cannot be read: ENOENT/),
      ]);
      expect(problems({ REDIS_TLS_CA_FILE: caFile, REDIS_TLS: 'false' })).toEqual([
        'REDIS_TLS_CA_FILE is set but REDIS_TLS=false: drop one of them',
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('REDIS_TLS_CERT_FILE and REDIS_TLS_KEY_FILE: a client certificate, both or neither, read at parse time', () => {
    const dir = mkdtempSync(join(tmpdir(), 'client-cert-'));
    try {
      const [caFile, certFile, keyFile] = ['ca.crt', 'client.crt', 'client.key'].map((f) => join(dir, f));
      for (const file of [caFile, certFile, keyFile]) writeFileSync(file, `PEM of ${file}\n`);
      const files = { REDIS_TLS_CA_FILE: caFile, REDIS_TLS_CERT_FILE: certFile, REDIS_TLS_KEY_FILE: keyFile };
      const { connection } = lockOptionsFromEnv({ REDIS_URL: 'redis://cache:6380', ...files });
      expect((connection as { tls: unknown }).tls).toEqual({
        ca: readFileSync(caFile),
        cert: readFileSync(certFile),
        key: readFileSync(keyFile),
      }); // files mean TLS, even with a redis:// URL
      const sentinel = lockOptionsFromEnv({
        REDIS_DEPLOY_TYPE: 'sentinel',
        REDIS_SENTINELS: 's1:26379',
        REDIS_SENTINEL_MASTER: 'm',
        REDIS_SENTINEL_TLS: 'true',
        REDIS_TLS_CERT_FILE: certFile,
        REDIS_TLS_KEY_FILE: keyFile,
      }).connection as { sentinelTls: { cert: Buffer } };
      expect(sentinel.sentinelTls.cert).toEqual(readFileSync(certFile)); // presented to the sentinels too

      expect(problems({ REDIS_TLS_CERT_FILE: certFile })).toEqual([
        'REDIS_TLS_CERT_FILE is set without REDIS_TLS_KEY_FILE: a client certificate needs both',
      ]);
      expect(problems({ REDIS_TLS_KEY_FILE: keyFile })).toEqual([
        'REDIS_TLS_KEY_FILE is set without REDIS_TLS_CERT_FILE: a client certificate needs both',
      ]);
      expect(problems({ REDIS_TLS_CERT_FILE: certFile, REDIS_TLS_KEY_FILE: join(dir, 'missing.key') })).toEqual([
        expect.stringMatching(/^REDIS_TLS_KEY_FILE cannot be read: ENOENT/),
      ]);
      expect(problems({ ...files, REDIS_TLS: 'false' })).toEqual([
        'REDIS_TLS_CA_FILE is set but REDIS_TLS=false: drop one of them',
        'REDIS_TLS_CERT_FILE is set but REDIS_TLS=false: drop one of them',
        'REDIS_TLS_KEY_FILE is set but REDIS_TLS=false: drop one of them',
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('never puts a password into an error message', () => {
    const env = {
      REDIS_DEPLOY_TYPE: 'master-slave',
      REDIS_URL: 'ftp://user:hunter2@host:1',
      REDIS_PASSWORD: 'hunter3',
      REDIS_DB: 'oops',
    };
    const error = (() => {
      try {
        lockOptionsFromEnv(env);
      } catch (e) {
        return e as Error;
      }
    })();
    expect(error).toBeInstanceOf(ConnectionConfigError);
    expect(error!.message).not.toMatch(/hunter/);
  });
});

function stripUndefined(value: unknown): unknown {
  return JSON.parse(JSON.stringify(value));
}
