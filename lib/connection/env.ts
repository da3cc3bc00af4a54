import { readFileSync } from 'node:fs';
import { ConnectionConfigError } from '../engine/errors';
import { keyPrefixProblem, MAX_TIMEOUT_MS } from '../engine/util/validation';
import { readHostPorts, redisUrlAddress, redisUrlProblem } from './addresses';
import type { CommonConnectionOptions, ConnectionOptions, DeployType, HostPort } from './connection-options';
import { DEPLOY_TYPES } from './connection-options';
import type { RedisLockClientOptions } from './create-lock-client';

/**
 * Environment variables read by `lockOptionsFromEnv`:
 *
 * | variable                     | meaning                                                        |
 * |------------------------------|----------------------------------------------------------------|
 * | REDIS_DEPLOY_TYPE            | single (default) / master-slave / sentinel / cluster           |
 * | REDIS_URL                    | single: redis[s]://[user:pass@]host:port[/db]; master-slave: the master |
 * | REDIS_REPLICAS               | master-slave: host:port,host:port                              |
 * | REDIS_SENTINELS              | sentinel: host:port,host:port                                  |
 * | REDIS_SENTINEL_MASTER        | sentinel: monitored master name                                |
 * | REDIS_SENTINEL_USERNAME      | sentinel: ACL user of the sentinels themselves (optional)      |
 * | REDIS_SENTINEL_PASSWORD      | sentinel: password of the sentinels themselves (optional)      |
 * | REDIS_SENTINEL_TLS           | sentinel: true / false, TLS to the sentinels (default REDIS_TLS) |
 * | REDIS_NODES                  | cluster: host:port,host:port (seed nodes)                      |
 * | REDIS_USERNAME, REDIS_PASSWORD | ACL user and password (never logged)                         |
 * | REDIS_DB                     | database index (not cluster)                                   |
 * | REDIS_TLS                    | true / false (a rediss:// REDIS_URL says true)                 |
 * | REDIS_TLS_CA_FILE            | PEM file of the CA that signed the servers' certificates (TLS) |
 * | REDIS_TLS_CERT_FILE          | PEM client certificate, for servers with tls-auth-clients (TLS) |
 * | REDIS_TLS_KEY_FILE           | PEM private key of that certificate (both or neither)         |
 * | REDIS_COMMAND_TIMEOUT        | ms before a command to a frozen server fails (default 2000)    |
 * | REDIS_LOCK_PREFIX            | key prefix of every lock (default "lock")                      |
 * | REDIS_LOCK_WATCHDOG_TIMEOUT  | watchdog lease in ms (default 30000)                           |
 * | REDIS_LOCK_OPERATION_TIMEOUT | ms a lock operation waits for Redis (default 3000; connecting  |
 * |                              | at start-up may take three)                                    |
 */
export const LOCK_ENV_VARIABLES = [
  'REDIS_DEPLOY_TYPE',
  'REDIS_URL',
  'REDIS_REPLICAS',
  'REDIS_SENTINELS',
  'REDIS_SENTINEL_MASTER',
  'REDIS_SENTINEL_USERNAME',
  'REDIS_SENTINEL_PASSWORD',
  'REDIS_SENTINEL_TLS',
  'REDIS_NODES',
  'REDIS_USERNAME',
  'REDIS_PASSWORD',
  'REDIS_DB',
  'REDIS_TLS',
  'REDIS_TLS_CA_FILE',
  'REDIS_TLS_CERT_FILE',
  'REDIS_TLS_KEY_FILE',
  'REDIS_COMMAND_TIMEOUT',
  'REDIS_LOCK_PREFIX',
  'REDIS_LOCK_WATCHDOG_TIMEOUT',
  'REDIS_LOCK_OPERATION_TIMEOUT',
] as const;

type Env = Record<string, string | undefined>;

/**
 * Turns the environment into lock client options. Every problem (unknown deploy type, missing or
 * malformed addresses, bad numbers) is collected and thrown as one ConnectionConfigError naming the
 * variable to fix. Passwords are never echoed.
 * @example
 * RedisLockModule.forRoot(lockOptionsFromEnv())
 */
export function lockOptionsFromEnv(env: Env = process.env): RedisLockClientOptions {
  const problems: string[] = [];
  const value = (name: string) => {
    const v = env[name]?.trim();
    return v === '' ? undefined : v;
  };
  const type = (value('REDIS_DEPLOY_TYPE') ?? 'single') as DeployType;
  if (!DEPLOY_TYPES.includes(type)) {
    problems.push(`REDIS_DEPLOY_TYPE must be one of ${DEPLOY_TYPES.join(', ')}; got "${value('REDIS_DEPLOY_TYPE')}"`);
  }

  const common: CommonConnectionOptions = {
    username: value('REDIS_USERNAME'),
    password: value('REDIS_PASSWORD'),
    db: integer(problems, 'REDIS_DB', value('REDIS_DB'), 0),
    tls: tlsFromEnv(problems, boolean(problems, 'REDIS_TLS', value('REDIS_TLS')), {
      ca: value('REDIS_TLS_CA_FILE'),
      cert: value('REDIS_TLS_CERT_FILE'),
      key: value('REDIS_TLS_KEY_FILE'),
    }),
    commandTimeout: integer(problems, 'REDIS_COMMAND_TIMEOUT', value('REDIS_COMMAND_TIMEOUT'), 1, MAX_TIMEOUT_MS),
  };
  const required = (name: string) => {
    const v = value(name);
    if (v === undefined) problems.push(`${name} is required when REDIS_DEPLOY_TYPE=${type}`);
    return v;
  };

  let connection: ConnectionOptions | undefined;
  switch (type) {
    case 'single': {
      const url = value('REDIS_URL');
      if (url !== undefined) parseUrl(problems, 'REDIS_URL', url);
      connection = { type, url: url ?? 'redis://127.0.0.1:6379', ...common };
      break;
    }
    case 'master-slave': {
      const masterUrl = required('REDIS_URL');
      const master = parseUrl(problems, 'REDIS_URL', masterUrl);
      const credentials = masterUrl && master ? new URL(masterUrl) : undefined;
      // Credentials in the master URL count, unless REDIS_USERNAME / REDIS_PASSWORD say otherwise.
      common.username ??= credentials?.username ? decodeURIComponent(credentials.username) : undefined;
      common.password ??= credentials?.password ? decodeURIComponent(credentials.password) : undefined;
      // As for a single server's URL: rediss:// is TLS unless REDIS_TLS says otherwise.
      common.tls ??= credentials?.protocol === 'rediss:' ? true : undefined;
      const replicas = addresses(problems, 'REDIS_REPLICAS', value('REDIS_REPLICAS') ?? '', 0);
      if (master) connection = { type, master, replicas, ...common };
      break;
    }
    case 'sentinel': {
      const sentinels = addresses(problems, 'REDIS_SENTINELS', required('REDIS_SENTINELS'), 1);
      const masterName = required('REDIS_SENTINEL_MASTER');
      connection = {
        type,
        sentinels,
        masterName: masterName ?? '',
        sentinelUsername: value('REDIS_SENTINEL_USERNAME'),
        sentinelPassword: value('REDIS_SENTINEL_PASSWORD'),
        sentinelTls: sentinelTls(boolean(problems, 'REDIS_SENTINEL_TLS', value('REDIS_SENTINEL_TLS')), common.tls),
        ...common,
      };
      break;
    }
    case 'cluster': {
      const nodes = addresses(problems, 'REDIS_NODES', required('REDIS_NODES'), 1);
      if (common.db) problems.push('REDIS_DB cannot be used with a cluster (it only has database 0)');
      connection = { type, nodes, ...common, db: undefined };
      break;
    }
  }
  const keyPrefix = value('REDIS_LOCK_PREFIX');
  const prefixProblem = keyPrefixProblem('REDIS_LOCK_PREFIX', keyPrefix);
  if (prefixProblem) problems.push(prefixProblem);
  const watchdogTimeout = integer(
    problems,
    'REDIS_LOCK_WATCHDOG_TIMEOUT',
    value('REDIS_LOCK_WATCHDOG_TIMEOUT'),
    1,
    MAX_TIMEOUT_MS,
  );
  const operationTimeout = integer(
    problems,
    'REDIS_LOCK_OPERATION_TIMEOUT',
    value('REDIS_LOCK_OPERATION_TIMEOUT'),
    1,
    MAX_TIMEOUT_MS,
  );

  if (problems.length > 0 || !connection) throw new ConnectionConfigError(problems);
  return { connection, keyPrefix, watchdogTimeout, operationTimeout };
}

function integer(
  problems: string[],
  name: string,
  raw: string | undefined,
  min: number,
  max = Number.MAX_SAFE_INTEGER,
): number | undefined {
  if (raw === undefined) return undefined;
  const n = Number(raw);
  if (!/^\d+$/.test(raw) || n < min || n > max) {
    const range = max === Number.MAX_SAFE_INTEGER ? `>= ${min}` : `in ${min}..${max}`;
    problems.push(`${name} must be an integer ${range}; got "${raw}"`);
    return undefined;
  }
  return n;
}

/** The PEM files of TLS settings, by the option each one fills (see tlsFromEnv). */
const TLS_FILE_VARIABLES = { ca: 'REDIS_TLS_CA_FILE', cert: 'REDIS_TLS_CERT_FILE', key: 'REDIS_TLS_KEY_FILE' } as const;
type TlsFiles = Partial<Record<keyof typeof TLS_FILE_VARIABLES, string>>;

/**
 * REDIS_TLS, with the files of TLS settings: a private CA to trust, a client certificate and its key
 * to present (REDIS_TLS_*_FILE). They are read now, so a wrong path is reported with the other
 * problems. A file means TLS, unless REDIS_TLS=false says otherwise: a contradiction. A certificate
 * goes with its key: one without the other is reported too.
 */
function tlsFromEnv(problems: string[], tls: boolean | undefined, files: TlsFiles): CommonConnectionOptions['tls'] {
  const given = (Object.keys(TLS_FILE_VARIABLES) as (keyof TlsFiles)[]).filter((option) => files[option] !== undefined);
  if (given.length === 0) return tls;
  if (tls === false) {
    for (const option of given)
      problems.push(`${TLS_FILE_VARIABLES[option]} is set but REDIS_TLS=false: drop one of them`);
    return tls;
  }
  if ((files.cert === undefined) !== (files.key === undefined)) {
    const [has, lacks] = files.cert === undefined ? ['KEY', 'CERT'] : ['CERT', 'KEY'];
    problems.push(`REDIS_TLS_${has}_FILE is set without REDIS_TLS_${lacks}_FILE: a client certificate needs both`);
  }
  const options: Partial<Record<keyof TlsFiles, Buffer>> = {};
  for (const option of given) {
    try {
      options[option] = readFileSync(files[option]!);
    } catch (error) {
      problems.push(`${TLS_FILE_VARIABLES[option]} cannot be read: ${(error as Error).message}`);
    }
  }
  return options;
}

/** REDIS_SENTINEL_TLS=true uses the files of REDIS_TLS_*_FILE too; unset, the sentinels follow the nodes. */
function sentinelTls(flag: boolean | undefined, nodes: CommonConnectionOptions['tls']): CommonConnectionOptions['tls'] {
  return flag === true && typeof nodes === 'object' ? nodes : flag;
}

function boolean(problems: string[], name: string, raw: string | undefined): boolean | undefined {
  if (raw === undefined) return undefined;
  if (/^(true|1|yes)$/i.test(raw)) return true;
  if (/^(false|0|no)$/i.test(raw)) return false;
  problems.push(`${name} must be true or false; got "${raw}"`);
  return undefined;
}

/** `host:port,host:port` -> addresses; malformed entries are reported by position. */
function addresses(problems: string[], name: string, raw: string | undefined, min: number): HostPort[] {
  if (raw === undefined) return [];
  const read = readHostPorts(name, raw, min);
  problems.push(...read.problems);
  return read.addresses;
}

/** Validates a redis[s]:// URL without ever putting its password into a message. */
function parseUrl(problems: string[], name: string, raw: string | undefined): HostPort | undefined {
  if (raw === undefined) return undefined;
  const problem = redisUrlProblem(name, raw);
  if (problem) problems.push(problem);
  return problem ? undefined : redisUrlAddress(raw);
}
