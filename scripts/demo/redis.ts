/**
 * Where the demo's Redis comes from: the environment the sample app reads (lockOptionsFromEnv) when
 * every configured address answers PING; otherwise a local topology on the dev ports
 * (scripts/redis-topology.ts). Same for RedLock's five independent masters (REDLOCK_NODES).
 */
import * as fs from 'node:fs';
import Redis, { ReplyError } from 'ioredis';
import { lockOptionsFromEnv, type ConnectionOptions, type DeployType } from '../../lib';
import { DEPLOY_TYPES, LOCK_ENV_VARIABLES } from '../../lib/internal';
import {
  DEV_BASE_PORTS,
  readTopology,
  RunningTopology,
  startTopology,
  stateDirFor,
  stopTopology,
  terminateTopologySync,
  TopologyKind,
} from '../redis-topology';
import { formatHostPort, parseHostPorts, redisUrlAddress, type HostPort } from '../tooling';
import { Cleanup } from './cleanup';

/** Which harness topology stands in for each deployment. */
export const TOPOLOGY_FOR: Record<DeployType, TopologyKind> = {
  single: 'single',
  'master-slave': 'replica',
  sentinel: 'sentinel',
  cluster: 'cluster',
};

/** The variables that say where the main Redis is, per deployment: none set = not configured. */
const ADDRESS_VARIABLES: Record<DeployType, string[]> = {
  single: ['REDIS_URL'],
  'master-slave': ['REDIS_URL', 'REDIS_REPLICAS'],
  sentinel: ['REDIS_SENTINELS', 'REDIS_SENTINEL_MASTER'],
  cluster: ['REDIS_NODES'],
};

/** Kept when the demo points the apps at a Redis it started; every other lock variable (addresses, auth, TLS) is dropped. */
const KEPT_VARIABLES: readonly string[] = [
  'REDIS_DEPLOY_TYPE',
  'REDIS_DB',
  'REDIS_COMMAND_TIMEOUT',
  'REDIS_LOCK_PREFIX',
  'REDIS_LOCK_WATCHDOG_TIMEOUT',
];
const CONNECTION_VARIABLES = LOCK_ENV_VARIABLES.filter((name) => !KEPT_VARIABLES.includes(name));

export type Env = Record<string, string | undefined>;

/** How one Redis (the main one, or the RedLock masters) was obtained. */
export interface RedisSource {
  /** configured: the environment's, answering; started: by this run; reused: a running dev topology. */
  origin: 'configured' | 'started' | 'reused';
  addresses: string[];
  /** The harness topology, when started or reused. */
  topology?: string;
}

export interface RedisSetup {
  deployType: DeployType;
  /** The environment for the app instances. */
  env: Env;
  main: RedisSource;
  /** undefined when v4 is not run. */
  redlock?: RedisSource;
}

export interface PrepareOptions {
  log: (line: string) => void;
  signal: AbortSignal;
  cleanup: Cleanup;
  /** Leave topologies this run started running at the end. */
  keep: boolean;
  /** Whether RedLock's five masters are needed (v4 is run). */
  redlock: boolean;
  /** Base ports of the topologies to start; default DEV_BASE_PORTS. */
  basePorts?: Record<TopologyKind, number>;
}

export function deployTypeOf(env: Env): DeployType {
  const raw = env.REDIS_DEPLOY_TYPE?.trim() || 'single';
  if (!(DEPLOY_TYPES as readonly string[]).includes(raw)) {
    throw new Error(`REDIS_DEPLOY_TYPE must be one of ${DEPLOY_TYPES.join(', ')}; got ${JSON.stringify(raw)}`);
  }
  return raw as DeployType;
}

/** Resolve (and if needed start) the main Redis and the RedLock masters; returns the apps' environment. */
export async function prepareRedis(baseEnv: Env, opts: PrepareOptions): Promise<RedisSetup> {
  const deployType = deployTypeOf(baseEnv);
  const env: Env = { ...baseEnv, REDIS_DEPLOY_TYPE: deployType };
  const [main, redlock] = await settleAll([
    resolveMain(deployType, env, opts),
    opts.redlock ? resolveRedLock(env, opts) : Promise.resolve(undefined),
  ]);
  if (!opts.redlock) delete env.REDLOCK_NODES;
  return { deployType, env, main, redlock };
}

async function resolveMain(deployType: DeployType, env: Env, opts: PrepareOptions): Promise<RedisSource> {
  const configured = ADDRESS_VARIABLES[deployType].filter((name) => env[name]?.trim());
  const what = `${deployType} Redis`;
  if (configured.length > 0) {
    // The library's own parser: the demo checks exactly the addresses the apps will use.
    const connection = lockOptionsFromEnv(env).connection as ConnectionOptions;
    const addresses = connectionAddresses(connection);
    const tls = ('tls' in connection && Boolean(connection.tls)) || /^rediss:/i.test(env.REDIS_URL ?? '');
    const down = await unreachable(addresses, tls);
    if (down.length === 0) {
      opts.log(`redis: using the configured ${what} at ${addresses.map(formatHostPort).join(', ')}`);
      return { origin: 'configured', addresses: addresses.map(formatHostPort) };
    }
    opts.log(`redis: the configured ${what} does not answer (${down.join('; ')})`);
  } else {
    opts.log(`redis: no ${what} configured (${ADDRESS_VARIABLES[deployType].join(', ')} unset)`);
  }
  const { topology, origin } = await obtainTopology('redis', TOPOLOGY_FOR[deployType], `the ${what}`, opts);
  for (const name of CONNECTION_VARIABLES) delete env[name];
  if (deployType === 'cluster') delete env.REDIS_DB;
  Object.assign(env, envForTopology(deployType, topology));
  return { origin, addresses: topologyAddresses(topology), topology: topology.name };
}

async function resolveRedLock(env: Env, opts: PrepareOptions): Promise<RedisSource> {
  const raw = env.REDLOCK_NODES?.trim();
  if (raw) {
    const addresses = parseHostPorts('REDLOCK_NODES', raw);
    const down = await unreachable(addresses, false);
    if (down.length === 0) {
      opts.log(`redlock: using the configured masters REDLOCK_NODES=${addresses.map(formatHostPort).join(',')}`);
      return { origin: 'configured', addresses: addresses.map(formatHostPort) };
    }
    opts.log(`redlock: the configured REDLOCK_NODES do not all answer (${down.join('; ')})`);
  } else {
    opts.log('redlock: REDLOCK_NODES unset (v4 needs 5 independent masters)');
  }
  const { topology, origin } = await obtainTopology('redlock', 'multi', "RedLock's 5 independent masters", opts);
  env.REDLOCK_NODES = topology.masters.map(formatHostPort).join(',');
  return { origin, addresses: topology.masters.map(formatHostPort), topology: topology.name };
}

/**
 * A dev topology that already runs and answers (`npm run redis:up`, an earlier `--keep`) is reused and
 * left running; otherwise one is started and, unless --keep, stopped at the end.
 */
async function obtainTopology(
  tag: string,
  kind: TopologyKind,
  what: string,
  opts: PrepareOptions,
): Promise<{ topology: RunningTopology; origin: 'started' | 'reused' }> {
  const basePort = (opts.basePorts ?? DEV_BASE_PORTS)[kind];
  const running = await runningTopology(kind, basePort);
  if (running) {
    opts.log(`${tag}: reusing the running topology ${running.name} for ${what} (left running at the end)`);
    logNodes(tag, running, opts.log);
    return { topology: running, origin: 'reused' };
  }
  opts.log(`${tag}: starting a local ${kind} topology for ${what} on ports ${basePort}+ (scripts/redis-topology.ts)`);
  const starting = startTopology(kind, { basePort, signal: opts.signal });
  // Registered before it settles: an interrupted start is aborted (startTopology then cleans up itself).
  const topology: { started?: RunningTopology } = {};
  opts.cleanup.add(
    `${kind} topology`,
    async () => {
      const t = await starting.catch(() => undefined);
      if (!t) return;
      if (opts.keep) {
        opts.log(`kept ${t.name} running (--keep): stop it with npm run redis:down -- ${kind}`);
        return;
      }
      await stopTopology(t);
      opts.log(`stopped ${t.name}`);
    },
    {
      group: 'redis',
      stopSync: () => {
        // A kept topology stays; one still starting never does (but only if it is ours: the state dir
        // may belong to another run that holds these ports).
        if (topology.started && opts.keep) return;
        const dir = stateDirFor(kind, basePort);
        const owner = topology.started?.ownerPid ?? tryOwner(dir);
        if (owner === process.pid) terminateTopologySync(dir);
      },
    },
  );
  const started = (topology.started = await starting);
  opts.log(`${tag}: started ${started.name}:`);
  logNodes(tag, started, opts.log);
  return { topology: started, origin: 'started' };
}

function tryOwner(stateDir: string): number | undefined {
  try {
    return readTopology(stateDir).ownerPid;
  } catch {
    return undefined;
  }
}

async function runningTopology(kind: TopologyKind, basePort: number): Promise<RunningTopology | undefined> {
  const dir = stateDirFor(kind, basePort);
  if (!fs.existsSync(dir)) return undefined;
  let t: RunningTopology;
  try {
    t = readTopology(dir);
  } catch {
    return undefined;
  }
  if (t.nodes.length === 0) return undefined;
  const down = await unreachable(
    t.nodes.map((n) => n.address),
    false,
  );
  return down.length === 0 ? t : undefined;
}

function logNodes(tag: string, t: RunningTopology, log: (line: string) => void): void {
  for (const node of t.nodes)
    log(`${tag}:   ${node.role.padEnd(8)} ${formatHostPort(node.address).padEnd(16)} pid ${node.pid}`);
  if (t.sentinelMasterName) log(`${tag}:   sentinel master name: ${t.sentinelMasterName}`);
}

/** The lock-env variables (lib/connection/env.ts) that point the apps at a harness topology. */
export function envForTopology(deployType: DeployType, t: RunningTopology): Env {
  const list = (addresses: HostPort[]): string => addresses.map(formatHostPort).join(',');
  switch (deployType) {
    case 'single':
      return { REDIS_DEPLOY_TYPE: deployType, REDIS_URL: `redis://${formatHostPort(t.masters[0])}` };
    case 'master-slave':
      return {
        REDIS_DEPLOY_TYPE: deployType,
        REDIS_URL: `redis://${formatHostPort(t.masters[0])}`,
        REDIS_REPLICAS: list(t.replicas),
      };
    case 'sentinel':
      return {
        REDIS_DEPLOY_TYPE: deployType,
        REDIS_SENTINELS: list(t.sentinels),
        REDIS_SENTINEL_MASTER: t.sentinelMasterName ?? 'mymaster',
      };
    case 'cluster':
      return { REDIS_DEPLOY_TYPE: deployType, REDIS_NODES: list([...t.masters, ...t.replicas]) };
  }
}

function topologyAddresses(t: RunningTopology): string[] {
  return t.nodes.map((n) => `${formatHostPort(n.address)} (${n.role})`);
}

/** The servers a connection from lockOptionsFromEnv names. */
function connectionAddresses(c: ConnectionOptions): HostPort[] {
  switch (c.type) {
    case 'single':
      return [c.url ? redisUrlAddress(c.url) : { host: c.host ?? '127.0.0.1', port: c.port ?? 6379 }];
    case 'master-slave':
      return [c.master, ...c.replicas];
    case 'sentinel':
      return c.sentinels;
    case 'cluster':
      return c.nodes;
    default:
      return [];
  }
}

/** The addresses that do not answer PING, each with the reason ("127.0.0.1:6379: ECONNREFUSED"). */
export async function unreachable(addresses: HostPort[], tls: boolean): Promise<string[]> {
  const results = await Promise.all(addresses.map((a) => ping(a, tls)));
  return results.flatMap((reason, i) => (reason === undefined ? [] : [`${formatHostPort(addresses[i])}: ${reason}`]));
}

/**
 * One PING with a short timeout and no retries. Any reply counts, errors included (NOAUTH: a server
 * that wants a password is there; the apps bring the password). Resolves undefined when it answered.
 */
export async function ping(address: HostPort, tls = false): Promise<string | undefined> {
  const client = new Redis({
    host: address.host,
    port: address.port,
    lazyConnect: true,
    connectTimeout: 500,
    commandTimeout: 500,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    enableReadyCheck: false,
    enableOfflineQueue: false,
    ...(tls ? { tls: { rejectUnauthorized: false } } : {}),
  });
  let connectionError: NodeJS.ErrnoException | undefined; // the cause; connect() only says "Connection is closed"
  client.on('error', (err: NodeJS.ErrnoException) => (connectionError ??= err));
  try {
    await client.connect();
    await client.ping();
    return undefined;
  } catch (err) {
    if (err instanceof ReplyError) return undefined;
    const e = connectionError ?? (err as NodeJS.ErrnoException);
    return e.code ?? e.message;
  } finally {
    client.disconnect();
  }
}

/** Promise.all that waits for every promise to settle first, so no start runs on after a failure. */
async function settleAll<A, B>(promises: [Promise<A>, Promise<B>]): Promise<[A, B]> {
  const [a, b] = await Promise.allSettled(promises);
  if (a.status === 'rejected') throw a.reason;
  if (b.status === 'rejected') throw b.reason;
  return [a.value, b.value];
}
