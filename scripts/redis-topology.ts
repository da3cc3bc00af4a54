/**
 * Real redis-server topologies (no mocks) for the tests and for local development, all on 127.0.0.1.
 * Used by test/global-setup.ts, by tests that need a private topology, and by scripts/redis-cli.ts.
 *
 * Port layout inside one topology, B = basePort:
 *   single    B                 one master
 *   replica   B                 master; B+1..B+3 replicas
 *   sentinel  B                 master; B+1..B+3 replicas; B+6..B+8 sentinels monitoring "mymaster"
 *   cluster   B..B+5            3 masters + 3 replicas (roles as `redis-cli --cluster create` assigns
 *                               them, see RunningTopology.masters/replicas); bus ports B+10000..B+10005
 *   multi     B..B+4            5 independent masters (RedLock)
 *
 * Port ranges (each topology fits in a block of 10):
 *   7100-7149   TEST_BASE_PORTS: the shared topologies test/global-setup.ts starts for every `npm test`
 *   7200-7399   private topologies for destructive tests (failover, SIGSTOP, restarts) and the bench:
 *               each user's base port and span is in scripts/test-ports.ts (PRIVATE_PORTS), which the
 *               specs and the bench import; test/harness/test-ports.spec.ts checks that none overlap.
 *               A clash at run time fails fast with "port(s) ... in use".
 *   REDIS_TOPOLOGY_PORT_SHIFT   moves all of the above by a multiple of 10 (two runs on one machine).
 *   7400-7449   DEV_BASE_PORTS: `npm run redis:up` by hand and the demo
 *   7450-7499   TLS-only, password-protected and mutual-TLS topologies of test/connection/ (PRIVATE_PORTS too)
 *   17100-17499 cluster bus ports (port + 10000). The machine's own Redis on 6379 is never touched.
 *
 * State: stateDirFor(kind, basePort) holds topology.json plus one dir per node, named by its port,
 * with redis.conf or sentinel.conf, redis.pid and redis.log. Nodes run daemonized (they never keep
 * node's event loop alive) and are only ever signalled by the pids recorded there, after checking the
 * pid is still a redis-server running in that node's dir (pid reuse; /proc, so Linux, with a weaker
 * `ps` check elsewhere). Leftovers of a crashed run are stopped by the next startTopology on the
 * same kind and basePort, or by `npm run redis:down`.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import {
  assertRedisInstalled,
  isAlive,
  isLiveNodeProcess,
  isOurRedis,
  isPortFree,
  readPidFile,
  RecordedProcess,
  run,
  startDaemon,
  terminateProcesses,
  terminateProcessesSync,
} from './topology/processes';
import {
  answersPing,
  clusterNodeReady,
  masterHasOnlineReplicas,
  parseClusterNodes,
  Probe,
  replicaLinked,
  sentinelReady,
  waitUntil,
  withClient,
  type Endpoint,
} from './topology/probes';
import { createTlsFiles, type TlsFiles } from './topology/tls';
import { formatHostPort, type HostPort } from './tooling';

export type TopologyKind = 'single' | 'replica' | 'sentinel' | 'cluster' | 'multi';
export const TOPOLOGY_KINDS: readonly TopologyKind[] = ['single', 'replica', 'sentinel', 'cluster', 'multi'];

export type NodeRole = 'master' | 'replica' | 'sentinel';

export interface TopologyNode {
  address: HostPort;
  /** The role it was started with; a sentinel failover can change it later. */
  role: NodeRole;
  pid: number;
  dir: string;
}

export interface RunningTopology {
  kind: TopologyKind;
  /** Label for logs and errors; defaults to `${kind}-${basePort}`. */
  name: string;
  basePort: number;
  stateDir: string;
  /** pid of the process that started it (jest, the redis CLI): a live owner makes the ports "in use". */
  ownerPid: number;
  /** $REDIS_TOPOLOGY_RUN_ID when it was started: ties a test's private topology to its jest run. */
  runId?: string;
  /** single: 1; replica & sentinel: the (initial) master; cluster: 3 masters; multi: 5 independent masters */
  masters: HostPort[];
  /** replica & sentinel: 3; cluster: 3; else [] */
  replicas: HostPort[];
  /** sentinel only: 3 */
  sentinels: HostPort[];
  /** sentinel only: 'mymaster' */
  sentinelMasterName?: string;
  /**
   * Started with `tls: true`: every node (sentinels too) listens for TLS only, on the ports above, and
   * replicas, sentinels and the cluster bus talk TLS among themselves. Clients trust `caFile`.
   */
  tls?: TlsFiles;
  /** Started with `tlsClientAuth`: nodes and sentinels accept only clients that present `tls.clientCertFile`. */
  tlsClientAuth?: boolean;
  /**
   * Started with `password`: every node requires it (`requirepass`, and `masterauth` for replication),
   * sentinels too, and they use it to reach the nodes and one another.
   */
  password?: string;
  nodes: TopologyNode[];
}

export const TEST_BASE_PORTS: Record<TopologyKind, number> = {
  single: 7100,
  replica: 7110,
  sentinel: 7120,
  cluster: 7130,
  multi: 7140,
};

export const DEV_BASE_PORTS: Record<TopologyKind, number> = {
  single: 7400,
  replica: 7410,
  sentinel: 7420,
  cluster: 7430,
  multi: 7440,
};

export const TOPOLOGY_STATE_ROOT = path.join(os.tmpdir(), 'nestjs-redis-lock');

/**
 * test/global-setup.ts sets this (jest workers inherit it) so every topology a test run starts,
 * private ones included, can be found and stopped on Ctrl-C or by global teardown.
 */
export const RUN_ID_ENV = 'REDIS_TOPOLOGY_RUN_ID';

const HOST = '127.0.0.1';
const SENTINEL_MASTER_NAME = 'mymaster';
const STATE_FILE = 'topology.json';
const PID_FILE = 'redis.pid';
const LOG_FILE = 'redis.log';
const CLUSTER_BUS_OFFSET = 10_000;

/**
 * `REDIS_TOPOLOGY_PORT_SHIFT=N` moves every topology this process starts or looks up by N ports
 * (state dirs follow), so two test runs can share a machine: e.g. 1000 puts the shared test
 * topologies on 8100-8149 and their cluster bus on 18130-18135. Default 0.
 */
export const PORT_SHIFT_ENV = 'REDIS_TOPOLOGY_PORT_SHIFT';

export function portShift(): number {
  const raw = process.env[PORT_SHIFT_ENV];
  if (raw === undefined || raw === '') return 0;
  const shift = Number(raw);
  if (!Number.isInteger(shift) || shift < 0 || shift > 40_000 || shift % 10 !== 0) {
    throw new Error(`${PORT_SHIFT_ENV} must be a multiple of 10 in 0-40000, got ${JSON.stringify(raw)}`);
  }
  return shift;
}

/** `basePort` is the unshifted one (as tests and the CLI name it). */
export function stateDirFor(kind: TopologyKind, basePort: number): string {
  return path.join(TOPOLOGY_STATE_ROOT, `${kind}-${basePort + portShift()}`);
}

/** Every state dir under the common root (what `redis:down` without arguments stops). */
export function listStateDirs(): string[] {
  return subdirs(TOPOLOGY_STATE_ROOT);
}

export function readTopology(stateDir: string): RunningTopology {
  const file = path.join(stateDir, STATE_FILE);
  if (!fs.existsSync(file)) {
    throw new Error(
      `no Redis topology state at ${file}: npm test starts the shared ones (test/global-setup.ts), ` +
        '`npm run redis:up` the dev ones, tests start private ones with startTopology()',
    );
  }
  return JSON.parse(fs.readFileSync(file, 'utf8')) as RunningTopology;
}

/** State dirs of the topologies started under one run id (see RUN_ID_ENV). */
export function stateDirsOfRun(runId: string): string[] {
  return listStateDirs().filter((dir) => tryReadTopology(dir)?.runId === runId);
}

/** True if the process that started `t` is still running and is not us. */
export function ownerIsRunning(t: RunningTopology): boolean {
  return t.ownerPid !== process.pid && isLiveNodeProcess(t.ownerPid);
}

export const isPidAlive = isAlive;
export { isPortFree };

export interface StartOptions {
  /** Defaults to DEV_BASE_PORTS[kind]; tests always pass theirs (see the port ranges above). */
  basePort?: number;
  name?: string;
  log?: (line: string) => void;
  /** Abort a start in progress: what was started so far is stopped and the promise rejects. */
  signal?: AbortSignal;
  /** Nodes that speak TLS only (see RunningTopology.tls). */
  tls?: boolean;
  /** With `tls`: nodes and sentinels also require a client certificate signed by the topology's CA (mutual TLS). */
  tlsClientAuth?: boolean;
  /** Nodes and sentinels that require this password (see RunningTopology.password). */
  password?: string;
}

export async function startTopology(kind: TopologyKind, opts: StartOptions = {}): Promise<RunningTopology> {
  assertRedisInstalled();
  const namedPort = opts.basePort ?? DEV_BASE_PORTS[kind];
  const basePort = namedPort + portShift();
  const t: RunningTopology = {
    kind,
    name: opts.name ?? `${kind}-${basePort}`,
    basePort,
    stateDir: stateDirFor(kind, namedPort),
    ownerPid: process.pid,
    ...(process.env[RUN_ID_ENV] ? { runId: process.env[RUN_ID_ENV] } : {}),
    masters: [],
    replicas: [],
    sentinels: [],
    ...(kind === 'sentinel' ? { sentinelMasterName: SENTINEL_MASTER_NAME } : {}),
    nodes: [],
  };
  const ctx: StartContext = { t, log: opts.log ?? (() => undefined), signal: opts.signal };
  const started = Date.now();

  await reclaimStateDir(ctx);
  const layout = layoutFor(kind, basePort);
  await assertPortsFree(t.name, [...layout.servers, ...layout.sentinels, ...layout.busPorts]);
  claimStateDir(t);
  if (opts.tls) t.tls = createTlsFiles(path.join(t.stateDir, 'tls'));
  if (opts.tls && opts.tlsClientAuth) t.tlsClientAuth = true;
  if (opts.password !== undefined) t.password = opts.password;
  persist(t);
  try {
    await STARTERS[kind](ctx, layout);
    t.nodes.sort((a, b) => a.address.port - b.address.port); // launched in parallel; list them in port order
    persist(t);
    ctx.log(`${t.name}: ready in ${((Date.now() - started) / 1000).toFixed(1)}s`);
    return t;
  } catch (err) {
    // Never leak a half-started topology; the error already carries the failing node's log tail.
    await stopTopology(t).catch((stopErr: unknown) => ctx.log(`${t.name}: cleanup failed: ${String(stopErr)}`));
    throw err;
  }
}

/**
 * Creates the state dir atomically: two runs starting the same topology at the same moment both
 * pass the checks above, but only one can create the dir; the other stops here, before it has
 * launched (or could stop) anything.
 */
function claimStateDir(t: RunningTopology): void {
  fs.mkdirSync(TOPOLOGY_STATE_ROOT, { recursive: true });
  try {
    fs.mkdirSync(t.stateDir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    throw new Error(
      `${t.name}: ${t.stateDir} was just claimed by another run starting the same topology; stop it or use another basePort.`,
    );
  }
}

/** Stop every recorded node (SIGTERM, SIGKILL after 5 s), wait until the pids are gone, remove the state dir. */
export async function stopTopology(t: RunningTopology | string): Promise<void> {
  const stateDir = ownStateDir(typeof t === 'string' ? t : t.stateDir);
  const recorded = typeof t === 'string' ? tryReadTopology(stateDir) : t;
  await terminateProcesses(recordedProcesses(stateDir, recorded));
  fs.rmSync(stateDir, { recursive: true, force: true });
}

/** Signal every recorded node without waiting: for `process.on('exit')` and signal handlers. */
export function terminateTopologySync(t: RunningTopology | string): void {
  const stateDir = typeof t === 'string' ? t : t.stateDir;
  terminateProcessesSync(recordedProcesses(stateDir, typeof t === 'string' ? tryReadTopology(stateDir) : t));
}

/** Send `signal` to the node's recorded pid (SIGSTOP/SIGCONT to simulate a hung node, SIGKILL a crash). */
export async function signalNode(
  t: RunningTopology,
  port: number,
  signal: 'SIGKILL' | 'SIGTERM' | 'SIGSTOP' | 'SIGCONT',
): Promise<void> {
  const node = findNode(t, port);
  if (!isOurRedis(processOf(node))) throw new Error(`${t.name}: node ${port} (pid ${node.pid}) is not running`);
  process.kill(node.pid, signal);
}

/** SIGTERM the node and wait until its pid is gone (SIGKILL after 5 s). No-op if it is not running. */
export async function stopNode(t: RunningTopology, port: number): Promise<void> {
  await terminateProcesses([processOf(findNode(t, port))]);
}

/**
 * Start the node again from its own config file on the same port (stopping it first if it still
 * runs), record the new pid (in `t` and topology.json) and wait until it answers PING. Data is not
 * kept (no persistence); a cluster node keeps its identity through nodes.conf, a sentinel its state.
 */
export async function restartNode(t: RunningTopology, port: number): Promise<void> {
  const node = findNode(t, port);
  await terminateProcesses([processOf(node)]);
  node.pid = await startDaemon(daemonArgs(node.role, node.dir), nodeFiles(node.dir));
  persist(t);
  const restarted = endpointOf(t, node.address);
  await waitUntil(`${t.name}: restarted ${node.role} ${formatHostPort(node.address)}`, answersPing(restarted), {
    logFile: nodeFiles(node.dir).logFile,
  });
}

// ---------------------------------------------------------------------------------------------
// Starting

interface StartContext {
  t: RunningTopology;
  log: (line: string) => void;
  signal?: AbortSignal;
}

interface Layout {
  /** redis-server data nodes: masters, replicas, cluster nodes */
  servers: number[];
  sentinels: number[];
  busPorts: number[];
}

const range = (from: number, count: number): number[] => Array.from({ length: count }, (_, i) => from + i);

function layoutFor(kind: TopologyKind, b: number): Layout {
  switch (kind) {
    case 'single':
      return { servers: [b], sentinels: [], busPorts: [] };
    case 'multi':
      return { servers: range(b, 5), sentinels: [], busPorts: [] };
    case 'replica':
      return { servers: range(b, 4), sentinels: [], busPorts: [] };
    case 'sentinel':
      return { servers: range(b, 4), sentinels: range(b + 6, 3), busPorts: [] };
    case 'cluster':
      return { servers: range(b, 6), sentinels: [], busPorts: range(b + CLUSTER_BUS_OFFSET, 6) };
  }
}

const STARTERS: Record<TopologyKind, (ctx: StartContext, layout: Layout) => Promise<void>> = {
  async single(ctx, layout) {
    ctx.t.masters = [await launchNode(ctx, layout.servers[0], 'master')];
    await waitAll(ctx, ctx.t.masters, 'master', answersPing);
  },

  async multi(ctx, layout) {
    ctx.t.masters = await allSettledOrThrow(layout.servers.map((port) => launchNode(ctx, port, 'master')));
    await waitAll(ctx, ctx.t.masters, 'master', answersPing);
  },

  replica: startReplicated,

  async sentinel(ctx, layout) {
    await startReplicated(ctx, layout);
    const [master] = ctx.t.masters;
    const name = SENTINEL_MASTER_NAME;
    const monitor = [
      'sentinel resolve-hostnames no',
      `sentinel monitor ${name} ${HOST} ${master.port} 2`,
      `sentinel down-after-milliseconds ${name} 1000`, // fast failover tests
      `sentinel failover-timeout ${name} 3000`,
      `sentinel parallel-syncs ${name} 1`,
      ...(ctx.t.password === undefined
        ? []
        : [`sentinel auth-pass ${name} ${quote(ctx.t.password)}`, `sentinel sentinel-pass ${quote(ctx.t.password)}`]),
    ];
    ctx.t.sentinels = await allSettledOrThrow(
      layout.sentinels.map((port) => launchNode(ctx, port, 'sentinel', monitor)),
    );
    const replicas = ctx.t.replicas.length;
    const peers = ctx.t.sentinels.length - 1;
    await waitAll(ctx, ctx.t.sentinels, 'sentinel', (s) => sentinelReady(s, name, master, replicas, peers));
  },

  async cluster(ctx, layout) {
    // Full coverage not required: while one shard fails over, the others keep serving (Redis's default
    // refuses every key of every shard until the failed shard's slots are covered again).
    const clusterConfig = [
      'cluster-enabled yes',
      'cluster-config-file nodes.conf',
      'cluster-node-timeout 2000',
      'cluster-require-full-coverage no',
      ...(ctx.t.tls ? ['tls-cluster yes'] : []),
    ];
    const nodes = await allSettledOrThrow(layout.servers.map((port) => launchNode(ctx, port, 'master', clusterConfig)));
    await waitAll(ctx, nodes, 'cluster node', answersPing);
    ctx.signal?.throwIfAborted();
    const create = await run(
      'redis-cli',
      [
        ...redisCliArgs(ctx.t),
        ...['--cluster', 'create', ...nodes.map(formatHostPort), '--cluster-replicas', '1', '--cluster-yes'],
      ],
      { timeoutMs: 60_000, signal: ctx.signal },
    );
    if (create.code !== 0) {
      throw new Error(`${ctx.t.name}: redis-cli --cluster create failed (exit ${create.code}):\n${create.output}`);
    }
    await waitAll(ctx, nodes, 'cluster node', (a) => clusterNodeReady(a, nodes.length / 2, 1));

    // redis-cli picks which nodes become masters; record what it did.
    const view = parseClusterNodes(
      String(await withClient(endpointOf(ctx.t, nodes[0]), (c) => c.call('CLUSTER', 'NODES'))),
    );
    for (const node of ctx.t.nodes) {
      const line = view.find((l) => l.port === node.address.port);
      node.role = line?.flags.includes('slave') ? 'replica' : 'master';
    }
    const byPort = (a: HostPort, b: HostPort): number => a.port - b.port;
    ctx.t.masters = ctx.t.nodes
      .filter((n) => n.role === 'master')
      .map((n) => n.address)
      .sort(byPort);
    ctx.t.replicas = ctx.t.nodes
      .filter((n) => n.role === 'replica')
      .map((n) => n.address)
      .sort(byPort);
  },
};

/** Master first; replicas once it answers; ready when every replica is linked and the master sees them online. */
async function startReplicated(ctx: StartContext, layout: Layout): Promise<void> {
  const [masterPort, ...replicaPorts] = layout.servers;
  const master = await launchNode(ctx, masterPort, 'master');
  ctx.t.masters = [master];
  await waitAll(ctx, [master], 'master', answersPing);
  const replicaOf = [`replicaof ${HOST} ${master.port}`];
  ctx.t.replicas = await allSettledOrThrow(replicaPorts.map((port) => launchNode(ctx, port, 'replica', replicaOf)));
  await waitAll(ctx, ctx.t.replicas, 'replica', replicaLinked);
  await waitAll(ctx, [master], 'master', (a) => masterHasOnlineReplicas(a, replicaPorts.length));
}

/** Write the node's config, start it daemonized and record its pid right away (crash-safe cleanup). */
async function launchNode(ctx: StartContext, port: number, role: NodeRole, extra: string[] = []): Promise<HostPort> {
  ctx.signal?.throwIfAborted();
  const dir = path.join(ctx.t.stateDir, String(port));
  const files = nodeFiles(dir);
  fs.mkdirSync(dir, { recursive: true });
  const config = [
    `bind ${HOST}`,
    ...(ctx.t.tls ? tlsConfig(ctx.t.tls, port, ctx.t.tlsClientAuth === true) : [`port ${port}`]),
    ...(ctx.t.password === undefined ? [] : passwordConfig(ctx.t.password, role)),
    'protected-mode no',
    'daemonize yes',
    `pidfile ${quote(files.pidFile)}`,
    `logfile ${quote(files.logFile)}`,
    `dir ${quote(dir)}`,
    // Data nodes only (sentinel mode has no dataset): nothing on disk, and full syncs start at once
    // instead of after the default 5 s diskless-sync delay.
    ...(role === 'sentinel' ? [] : ['save ""', 'appendonly no', 'repl-diskless-sync-delay 0']),
    ...extra,
  ];
  fs.writeFileSync(configFile(role, dir), config.join('\n') + '\n');
  const pid = await startDaemon(daemonArgs(role, dir), files);
  const address = { host: HOST, port };
  ctx.t.nodes.push({ address, role, pid, dir });
  persist(ctx.t);
  ctx.log(`${ctx.t.name}: started ${role} ${formatHostPort(address)} pid ${pid}`);
  return address;
}

async function waitAll(
  ctx: StartContext,
  addresses: HostPort[],
  what: string,
  probeFor: (address: Endpoint) => Probe,
): Promise<void> {
  await allSettledOrThrow(
    addresses.map((a) =>
      waitUntil(`${ctx.t.name}: ${what} ${formatHostPort(a)}`, probeFor(endpointOf(ctx.t, a)), {
        logFile: nodeFiles(path.join(ctx.t.stateDir, String(a.port))).logFile,
        signal: ctx.signal,
      }),
    ),
  );
}

/**
 * A TLS node: the TLS port instead of the plain one, its certificate, and TLS on every link it opens
 * (a replica to its master, a sentinel to the nodes and other sentinels, the cluster bus: `tls-cluster`).
 * A cluster bus port is the TLS port + 10000, as it would be for a plain one.
 */
function tlsConfig(tls: TlsFiles, port: number, clientAuth: boolean): string[] {
  return [
    'port 0',
    `tls-port ${port}`,
    `tls-cert-file ${quote(tls.certFile)}`,
    `tls-key-file ${quote(tls.keyFile)}`,
    `tls-ca-cert-file ${quote(tls.caFile)}`,
    `tls-auth-clients ${clientAuth ? 'yes' : 'no'}`,
    'tls-replication yes',
  ];
}

/** A node of a topology with a password: clients must AUTH, and replicas (or a sentinel) AUTH to masters. */
function passwordConfig(password: string, role: NodeRole): string[] {
  return [`requirepass ${quote(password)}`, ...(role === 'sentinel' ? [] : [`masterauth ${quote(password)}`])];
}

/** How to reach a node of `t` with a client of ours: its address, the CA of a TLS topology, its password. */
export function endpointOf(t: RunningTopology, address: HostPort): Endpoint {
  return {
    ...address,
    ...(t.tls ? { tls: tlsClientOptions(t, t.tls) } : {}),
    ...(t.password === undefined ? {} : { password: t.password }),
  };
}

/** What a client of `t` needs for TLS: the CA, and the client certificate where nodes ask for one. */
function tlsClientOptions(t: RunningTopology, tls: TlsFiles): NonNullable<Endpoint['tls']> {
  const ca = fs.readFileSync(tls.caFile);
  if (!t.tlsClientAuth) return { ca };
  return { ca, cert: fs.readFileSync(tls.clientCertFile), key: fs.readFileSync(tls.clientKeyFile) };
}

/** redis-cli's flags for a topology's nodes: TLS, password. */
function redisCliArgs(t: RunningTopology): string[] {
  return [
    ...(t.tls ? ['--tls', '--cacert', t.tls.caFile] : []),
    ...(t.tls && t.tlsClientAuth ? ['--cert', t.tls.clientCertFile, '--key', t.tls.clientKeyFile] : []),
    ...(t.password === undefined ? [] : ['-a', t.password, '--no-auth-warning']),
  ];
}

/** Like Promise.all, but waits for every launch to settle so none finishes after cleanup ran. */
async function allSettledOrThrow<T>(promises: Promise<T>[]): Promise<T[]> {
  const results = await Promise.allSettled(promises);
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
  return results.map((r) => (r as PromiseFulfilledResult<T>).value);
}

/** Stop what an earlier (crashed) run left in this state dir, then wipe it. */
async function reclaimStateDir(ctx: StartContext): Promise<void> {
  const { stateDir } = ctx.t;
  if (!fs.existsSync(stateDir)) return;
  const previous = tryReadTopology(stateDir);
  if (previous && ownerIsRunning(previous)) {
    throw new Error(
      `${ctx.t.name}: ${stateDir} belongs to a topology started by process ${previous.ownerPid}, which still runs ` +
        '(another jest run or redis:up?). Stop that first or use another basePort.',
    );
  }
  const leftovers = recordedProcesses(stateDir, previous).filter(isOurRedis);
  if (leftovers.length > 0) ctx.log(`${ctx.t.name}: stopping leftover pids ${leftovers.map((p) => p.pid).join(', ')}`);
  await terminateProcesses(leftovers);
  fs.rmSync(stateDir, { recursive: true, force: true });
}

async function assertPortsFree(name: string, ports: number[]): Promise<void> {
  const free = await Promise.all(ports.map(isPortFree));
  const taken = ports.filter((_, i) => !free[i]);
  if (taken.length > 0) {
    throw new Error(
      `${name}: port(s) ${taken.join(', ')} on ${HOST} already in use by another process ` +
        `(see: ss -ltnp | grep -E ':(${taken.join('|')})\\b'); free them or choose another basePort`,
    );
  }
}

// ---------------------------------------------------------------------------------------------
// State files

function persist(t: RunningTopology): void {
  // Write-then-rename: other processes (tests, redis:down) never read a half-written file.
  const file = path.join(t.stateDir, STATE_FILE);
  fs.writeFileSync(`${file}.tmp`, JSON.stringify(t, null, 2) + '\n');
  fs.renameSync(`${file}.tmp`, file);
}

function tryReadTopology(stateDir: string): RunningTopology | undefined {
  try {
    return readTopology(stateDir);
  } catch {
    return undefined; // missing or torn state: the pid files are the fallback
  }
}

/** Pids from topology.json plus each node dir's pid file (covers a crash before topology.json was updated). */
function recordedProcesses(stateDir: string, t: RunningTopology | undefined): RecordedProcess[] {
  const procs = new Map<number, RecordedProcess>();
  for (const node of t?.nodes ?? []) procs.set(node.pid, processOf(node));
  for (const dir of subdirs(stateDir)) {
    const pid = readPidFile(nodeFiles(dir).pidFile);
    if (pid !== undefined && !procs.has(pid)) procs.set(pid, { pid, port: Number(path.basename(dir)), dir });
  }
  return [...procs.values()];
}

/** stopTopology deletes the directory it is given: only ever one of ours. */
function ownStateDir(stateDir: string): string {
  const resolved = path.resolve(stateDir);
  if (path.dirname(resolved) !== TOPOLOGY_STATE_ROOT) {
    throw new Error(`${stateDir} is not a topology state dir (expected one under ${TOPOLOGY_STATE_ROOT})`);
  }
  return resolved;
}

function subdirs(dir: string): string[] {
  try {
    return fs
      .readdirSync(dir, { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .map((e) => path.join(dir, e.name));
  } catch {
    return [];
  }
}

function findNode(t: RunningTopology, port: number): TopologyNode {
  const node = t.nodes.find((n) => n.address.port === port);
  if (!node)
    throw new Error(`${t.name} has no node on port ${port} (has ${t.nodes.map((n) => n.address.port).join(', ')})`);
  return node;
}

const processOf = (node: TopologyNode): RecordedProcess => ({ pid: node.pid, port: node.address.port, dir: node.dir });

const nodeFiles = (dir: string): { pidFile: string; logFile: string } => ({
  pidFile: path.join(dir, PID_FILE),
  logFile: path.join(dir, LOG_FILE),
});

const configFile = (role: NodeRole, dir: string): string =>
  path.join(dir, role === 'sentinel' ? 'sentinel.conf' : 'redis.conf');

const daemonArgs = (role: NodeRole, dir: string): string[] =>
  role === 'sentinel' ? [configFile(role, dir), '--sentinel'] : [configFile(role, dir)];

/** redis.conf string quoting, for paths under an unusual TMPDIR. */
const quote = (value: string): string => JSON.stringify(value);
