/**
 * Start and stop Redis topologies by hand (see scripts/redis-topology.ts for the port layout).
 *
 *   npm run redis:up                             single master on DEV_BASE_PORTS.single (7400)
 *   npm run redis:up -- sentinel cluster         the listed kinds (single replica sentinel cluster multi)
 *   npm run redis:up -- all                      all five kinds
 *   npm run redis:up -- replica --base-port 7500 one kind on another base port
 *   npm run redis:up -- sentinel --tls           nodes that take TLS only (prints the CA file to trust)
 *   npm run redis:up -- single --tls --client-auth  ...that also require a client certificate (prints its files)
 *   npm run redis:down                           every topology under the state root; skips those whose
 *                                                starter still runs (a jest run) unless --force
 *   npm run redis:down -- sentinel               the dev topology of that kind (or --base-port N)
 *
 * Nodes are daemons: they keep running after `up` returns, until `down`. Ctrl-C during `up` stops
 * whatever was started so far.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import {
  DEV_BASE_PORTS,
  isPidAlive,
  listStateDirs,
  ownerIsRunning,
  readTopology,
  RunningTopology,
  startTopology,
  stateDirFor,
  stopTopology,
  TOPOLOGY_KINDS,
  TOPOLOGY_STATE_ROOT,
  TopologyKind,
} from './redis-topology';

const USAGE = `usage: tsx scripts/redis-cli.ts up   [all | kind ...] [--base-port N] [--tls [--client-auth]]
       tsx scripts/redis-cli.ts down [all | kind ...] [--base-port N] [--force]
kinds: ${TOPOLOGY_KINDS.join(' ')}`;

interface Args {
  command: 'up' | 'down';
  kinds: TopologyKind[];
  basePort?: number;
  force: boolean;
  tls: boolean;
  clientAuth: boolean;
}

function parseArgs(argv: string[]): Args {
  const [command, ...rest] = argv;
  if (command !== 'up' && command !== 'down') throw new UsageError(`unknown command ${JSON.stringify(command)}`);
  const kinds = new Set<TopologyKind>();
  let basePort: number | undefined;
  let force = false;
  let tls = false;
  let clientAuth = false;
  for (let i = 0; i < rest.length; i++) {
    const arg = rest[i];
    if (arg === '--force') force = true;
    else if (arg === '--tls' && command === 'up') tls = true;
    else if (arg === '--client-auth' && command === 'up') clientAuth = true;
    else if (arg === '--base-port' || arg.startsWith('--base-port=')) {
      const value = arg.includes('=') ? arg.split('=')[1] : rest[++i];
      basePort = Number(value);
      if (!Number.isInteger(basePort) || basePort < 1024 || basePort > 55_000) {
        throw new UsageError(`--base-port needs a port number in 1024-55000, got ${JSON.stringify(value)}`);
      }
    } else if (arg === 'all') TOPOLOGY_KINDS.forEach((k) => kinds.add(k));
    else if ((TOPOLOGY_KINDS as readonly string[]).includes(arg)) kinds.add(arg as TopologyKind);
    else throw new UsageError(`unknown argument ${JSON.stringify(arg)}`);
  }
  if (command === 'up' && kinds.size === 0) kinds.add('single');
  if (basePort !== undefined && kinds.size !== 1) throw new UsageError('--base-port needs exactly one kind');
  if (clientAuth && !tls) throw new UsageError('--client-auth goes with --tls');
  return { command, kinds: [...kinds], basePort, force, tls, clientAuth };
}

class UsageError extends Error {}

async function up({ kinds, basePort, tls, clientAuth }: Args): Promise<number> {
  const abort = new AbortController();
  const onSignal = (): void => {
    console.error('\ninterrupted: stopping what was started so far...');
    abort.abort();
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    const results = await Promise.allSettled(
      kinds.map((kind) =>
        startTopology(kind, {
          basePort: basePort ?? DEV_BASE_PORTS[kind],
          signal: abort.signal,
          tls,
          tlsClientAuth: clientAuth,
        }),
      ),
    );
    const started = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
    if (abort.signal.aborted) {
      // startTopology cleaned up the interrupted ones itself; stop the ones that had finished.
      await Promise.all(started.map((t) => stopTopology(t)));
      console.error(
        `stopped ${started.length} finished topolog${started.length === 1 ? 'y' : 'ies'}; nothing left running`,
      );
      return 130;
    }
    for (const t of started) printTopology('started', t);
    const failures = results.flatMap((r) => (r.status === 'rejected' ? [r.reason as unknown] : []));
    for (const err of failures) console.error(`\nfailed: ${err instanceof Error ? err.message : String(err)}`);
    if (started.length > 0) console.log(`\nstop with: npm run redis:down`);
    return failures.length > 0 ? 1 : 0;
  } finally {
    process.removeListener('SIGINT', onSignal);
    process.removeListener('SIGTERM', onSignal);
  }
}

async function down({ kinds, basePort, force }: Args): Promise<number> {
  const dirs = kinds.length > 0 ? kinds.map((k) => stateDirFor(k, basePort ?? DEV_BASE_PORTS[k])) : listStateDirs();
  if (dirs.length === 0) console.log(`nothing to stop (no state under ${TOPOLOGY_STATE_ROOT})`);
  let failed = 0;
  for (const dir of dirs) {
    if (!fs.existsSync(dir)) {
      console.log(`${path.basename(dir)}: not running (no state at ${dir})`);
      continue;
    }
    let t: RunningTopology | undefined;
    try {
      t = readTopology(dir);
    } catch {
      t = undefined; // torn start: stopTopology still finds the pid files
    }
    if (t && ownerIsRunning(t) && !force) {
      console.log(
        `${t.name}: skipped, started by process ${t.ownerPid} which still runs (a jest run?); --force to stop it anyway`,
      );
      continue;
    }
    const wasAlive = new Map(t?.nodes.map((n) => [n.pid, isPidAlive(n.pid)]));
    try {
      await stopTopology(dir);
    } catch (err) {
      failed++;
      console.error(`${path.basename(dir)}: ${err instanceof Error ? err.message : String(err)}`);
      continue;
    }
    if (t) printTopology('stopped', t, (pid) => (wasAlive.get(pid) ? '' : ' (was not running)'));
    else
      console.log(
        `stopped ${path.basename(dir)} (no topology.json; stopped the pids in its pid files)\n  state: ${dir}`,
      );
  }
  return failed > 0 ? 1 : 0;
}

function printTopology(verb: string, t: RunningTopology, note: (pid: number) => string = () => ''): void {
  console.log(`\n${verb} ${t.kind} topology ${t.name}`);
  for (const node of t.nodes) {
    const address = `${node.address.host}:${node.address.port}`;
    console.log(`  ${node.role.padEnd(8)} ${address.padEnd(16)} pid ${node.pid}${note(node.pid)}`);
  }
  if (t.sentinelMasterName) console.log(`  sentinel master name: ${t.sentinelMasterName}`);
  if (t.tls) console.log(`  TLS only; trust the CA in ${t.tls.caFile} (e.g. NODE_EXTRA_CA_CERTS)`);
  if (t.tls && t.tlsClientAuth) {
    console.log(`  client certificate required: ${t.tls.clientCertFile}, key ${t.tls.clientKeyFile}`);
  }
  console.log(`  state: ${t.stateDir}`);
}

async function main(): Promise<number> {
  let args: Args;
  try {
    args = parseArgs(process.argv.slice(2));
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    console.error(`${err.message}\n${USAGE}`);
    return 2;
  }
  return args.command === 'up' ? up(args) : down(args);
}

main().then(
  (code) => (process.exitCode = code),
  (err: unknown) => {
    console.error(err instanceof Error ? err.message : err);
    process.exitCode = 1;
  },
);
