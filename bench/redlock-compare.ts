/**
 * RedLock, ours against `@sesamecare-oss/redlock`, on the same five independent masters, no faults:
 * 8 worker processes loop on one lock name; inside, a racy counter (GET, 1 ms, SET on the first
 * master) so a double grant would show as a lost update. Runs the two libraries alternately
 * (ROUNDS times each) and prints acquisitions per second, the commands the masters ran per
 * acquisition and the workers' CPU per acquisition.
 *
 *   REDIS_TOPOLOGY_PORT_SHIFT=1000 npx tsx bench/redlock-compare.ts
 *
 * Starts its own 'multi' topology on basePort 7380 (7380-7384, plus the shift) and stops it, by the
 * pids it recorded, at the end. Environment: DURATION_MS (5000, after WARMUP_MS 2000), ROUNDS (2), WORKERS (8),
 * SUBJECTS ('ours,redlock'), BREAKDOWN=1 (commands per acquisition by name), CPU_PROF_DIR (a CPU
 * profile of each worker there).
 */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import Redis from 'ioredis';
import { ExecutionError, Redlock } from '@sesamecare-oss/redlock';
import { LockClient, RedLock } from '../lib';
import { startTopology, stopTopology } from '../scripts/redis-topology';
import { silentLogger, sleep } from '../scripts/tooling';
import { PRIVATE_PORTS } from '../scripts/test-ports';

type Subject = 'ours' | 'redlock';

interface WorkerResult {
  acquisitions: number;
  /** Acquisitions during the warm-up (they incremented the counter too). */
  warmups: number;
  giveUps: number;
  releaseFailures: number;
  cpuMs: number;
}

const BASE_PORT = PRIVATE_PORTS.benchRedLockCompare.base;
const LEASE_MS = 30_000;
const env = process.env;

/** What a user writes: ioredis clients at their defaults. */
const clientsFor = (ports: number[]): Redis[] => ports.map((port) => new Redis({ host: '127.0.0.1', port }));

async function worker(): Promise<void> {
  const ports = env.PORTS!.split(',').map(Number);
  const subject = env.SUBJECT as Subject;
  const redis = clientsFor(ports);
  const counter = redis[0];
  const counterKey = env.COUNTER_KEY!;
  const section = async (): Promise<void> => {
    const value = Number(await counter.get(counterKey));
    await sleep(1);
    await counter.set(counterKey, String(value + 1));
  };
  let giveUps = 0;
  let releaseFailures = 0;
  let once: () => Promise<void>;
  let close: () => Promise<void>;
  if (subject === 'ours') {
    const locks = redis.map((r) => new LockClient({ redis: r, keyPrefix: 'bench-rl', logger: silentLogger }));
    const redLock = new RedLock(locks, env.LOCK_NAME!);
    once = () => redLock.withLock(section);
    close = async () => void (await Promise.all(locks.map((l) => l.close())));
  } else {
    const redlock = new Redlock(redis); // defaults: retryCount 10, retryDelay 200 ms, retryJitter 100 ms
    redlock.on('error', () => undefined); // every refused attempt is emitted as an error
    once = async () => {
      for (;;) {
        try {
          const lock = await redlock.acquire([`bench-rl:${env.LOCK_NAME}`], LEASE_MS);
          try {
            await section();
          } finally {
            await lock.release().catch(() => void releaseFailures++);
          }
          return;
        } catch (error) {
          if (!(error instanceof ExecutionError)) throw error;
          giveUps++; // redlock gave up after retryCount attempts: ask again, as a caller would
        }
      }
    };
    close = async () => undefined;
  }
  await Promise.all(redis.map((r) => r.ping()));
  console.log('ready');
  const startAt = await new Promise<number>((resolve) =>
    createInterface({ input: process.stdin }).once('line', (line) => resolve(Number(line))),
  );
  await sleep(Math.max(0, startAt - Date.now()));
  const measureFrom = startAt + Number(env.WARMUP_MS);
  let warmups = 0;
  for (; Date.now() < measureFrom; warmups++) await once(); // warm-up: subscriptions, JIT
  const cpuStart = process.cpuUsage();
  const until = measureFrom + Number(env.DURATION_MS);
  let acquisitions = 0;
  giveUps = 0;
  while (Date.now() < until) {
    await once();
    acquisitions++;
  }
  const cpu = process.cpuUsage(cpuStart);
  await close();
  await Promise.all(redis.map((r) => r.quit().catch(() => undefined)));
  const result: WorkerResult = {
    acquisitions,
    warmups,
    giveUps,
    releaseFailures,
    cpuMs: (cpu.user + cpu.system) / 1000,
  };
  console.log(JSON.stringify(result));
}

/** A worker process: `ready` once connected, `start(at)` to begin at that time, `result` when done. */
function startWorker(workerEnv: Record<string, string>) {
  const profile = env.CPU_PROF_DIR ? ['--cpu-prof', `--cpu-prof-dir=${env.CPU_PROF_DIR}`] : [];
  const child = spawn(process.execPath, [...profile, '--import', 'tsx', __filename], {
    env: { ...process.env, ...workerEnv, REDLOCK_COMPARE_WORKER: '1' },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  let out = '';
  let onReady: () => void;
  const ready = new Promise<void>((resolve) => (onReady = resolve));
  child.stdout.on('data', (chunk: Buffer) => {
    out += chunk.toString();
    if (out.startsWith('ready\n')) onReady();
  });
  const result = new Promise<WorkerResult>((resolve, reject) =>
    child.on('exit', (code) => {
      if (code !== 0) return reject(new Error(`worker exited with ${code}`));
      resolve(JSON.parse(out.trim().split('\n').pop()!) as WorkerResult);
    }),
  );
  return { ready, result, start: (at: number) => child.stdin.end(`${at}\n`) };
}

/** Commands the masters ran since the last reset, by name (every command but INFO / CONFIG). */
async function commandCounts(masters: Redis[]): Promise<Record<string, number>> {
  const infos = await Promise.all(masters.map((m) => m.info('commandstats')));
  const counts: Record<string, number> = {};
  for (const info of infos) {
    for (const match of info.matchAll(/^cmdstat_([a-z|]+):calls=(\d+)/gm)) {
      if (!/^(info|config)/.test(match[1])) counts[match[1]] = (counts[match[1]] ?? 0) + Number(match[2]);
    }
  }
  return counts;
}

async function measure(subject: Subject, ports: number[], masters: Redis[], run: number) {
  const workers = Number(env.WORKERS ?? 8);
  const durationMs = Number(env.DURATION_MS ?? 5_000);
  const warmupMs = Number(env.WARMUP_MS ?? 2_000);
  const name = `hot-${subject}-${run}`;
  const counterKey = `bench-rl:counter:${name}`;
  const procs = Array.from({ length: workers }, () =>
    startWorker({
      SUBJECT: subject,
      PORTS: ports.join(','),
      LOCK_NAME: name,
      COUNTER_KEY: counterKey,
      DURATION_MS: String(durationMs),
      WARMUP_MS: String(warmupMs),
    }),
  );
  await Promise.all(procs.map((p) => p.ready));
  const startAt = Date.now() + 300;
  procs.forEach((p) => p.start(startAt));
  await sleep(startAt + warmupMs - Date.now());
  await Promise.all(masters.map((m) => m.config('RESETSTAT')));
  const results = await Promise.all(procs.map((p) => p.result));
  const acquisitions = results.reduce((s, r) => s + r.acquisitions, 0);
  const counter = Number(await masters[0].get(counterKey));
  const counts = await commandCounts(masters);
  const commands = Object.values(counts).reduce((sum, n) => sum + n, 0);
  const cpuMs = results.reduce((s, r) => s + r.cpuMs, 0);
  const shares = results.map((r) => r.acquisitions).sort((a, b) => b - a);
  console.log(
    `${subject.padEnd(8)} run ${run}: ${(acquisitions / (durationMs / 1000)).toFixed(0).padStart(4)} acq/s ` +
      `(${acquisitions} in ${durationMs} ms), lost updates ${acquisitions + results.reduce((s, r) => s + r.warmups, 0) - counter}, ` +
      `${(commands / acquisitions).toFixed(1)} commands/acq on the masters, ` +
      `${(cpuMs / acquisitions).toFixed(2)} ms worker CPU/acq, give-ups ${results.reduce((s, r) => s + r.giveUps, 0)}, ` +
      `failed releases ${results.reduce((s, r) => s + r.releaseFailures, 0)}, ` +
      `per process ${shares.join('/')}`,
  );
  if (env.BREAKDOWN) {
    const perAcq = Object.entries(counts).map(([name, n]) => `${name} ${(n / acquisitions).toFixed(1)}`);
    console.log(`  per acquisition: ${perAcq.join(', ')}`);
  }
}

async function main(): Promise<void> {
  const topology = await startTopology('multi', { basePort: BASE_PORT, name: 'redlock-compare' });
  const ports = topology.masters.map((m) => m.port);
  const masters = ports.map((port) => new Redis({ host: '127.0.0.1', port }));
  try {
    console.log(`5 masters on ${ports.join(', ')}; ${env.WORKERS ?? 8} processes; 1 ms critical section`);
    const subjects = (env.SUBJECTS ?? 'ours,redlock').split(',') as Subject[];
    for (let run = 1; run <= Number(env.ROUNDS ?? 2); run++) {
      for (const subject of subjects) await measure(subject, ports, masters, run);
    }
  } finally {
    masters.forEach((m) => m.disconnect());
    await stopTopology(topology);
  }
}

(env.REDLOCK_COMPARE_WORKER ? worker() : main()).catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
