/**
 * Client CPU per acquisition on one hot key, by the number of processes sharing it: where the CPU of
 * a contended lock goes when each process gets the lock only now and then. N worker processes loop
 * on one key (acquire; MGET the counter; sleep SECTION_MS; MSET counter + 1 together with the
 * release); after a warm-up the workers' CPU is read from /proc over the window, split into the main
 * thread (JavaScript, the event loop, syscalls) and the others (V8's compiler and GC helpers), with
 * voluntary context switches and the commands Redis ran per acquisition. The counter checks that no
 * update was lost.
 *
 *   npm run build && taskset -c 1 npx tsx bench/cpu-per-process.ts
 *
 * The contenders are `npm run bench`'s (bench/lib/contenders.ts: ours as the compiled package, the
 * peers as their packages ship). Starts its own 'single' topology on basePort 7390 (plus
 * REDIS_TOPOLOGY_PORT_SHIFT) and stops it, by the pids it recorded, at the end. Linux only (/proc).
 * Environment: CONTENDERS ('reentrant,redlock,raw'), PROCESSES ('1,2,4,8'), SECTION_MS (1),
 * WARMUP_MS (5000), DURATION_MS (6000), ROUNDS (1; contenders alternate within a round).
 * CONTENDERS may also name `hand-off-floor` (bench/lib/hand-off-floor.ts: the least a wake-one lock
 * can do, every grant moving to the next process in line); with BENCH_TURN_TIME=0 ours move at every
 * grant too, so `BENCH_TURN_TIME=0 CONTENDERS=reentrant,fair,hand-off-floor PROCESSES=2 SECTION_MS=0`
 * prices one move of the lock to another process.
 *
 * `in-turn`: the other half of that price, the acquisitions inside one turn. One process per
 * contender, two clients: one loops on the key (as a worker does, SECTION_MS 0) while the other
 * waits for it, so the loop runs in a contended turn; ours get a 60 s `turnTime`, so the turn never
 * ends on its own while measured. Prints the process's CPU per acquisition (process.cpuUsage). The
 * fair lock and the hand-off floor take no turns: there every grant alternates between the two clients.
 *
 *   npm run build && taskset -c 1 npx tsx bench/cpu-per-process.ts in-turn
 *
 * `loop <contender> <iterations> <port>`: one process, no contention, acquire + release `iterations`
 * times against a Redis already running on `port` (e.g. `npm run redis:up`, port 7400), to count the
 * instructions of one acquire + release under callgrind: run it with two iteration counts and divide
 * the difference of the totals by the difference of the counts (start-up cancels out). Noisy: when
 * V8 compiles what varies from run to run (±25 % between repeats here, even with --single-threaded),
 * so repeat it, and take counts in the thousands.
 *
 *   valgrind --tool=callgrind node --single-threaded --import tsx bench/cpu-per-process.ts loop reentrant 10000 7400
 *
 * Where the CPU goes: `perf record -e cpu-clock -g -- taskset -c 1 node --perf-basic-prof --import tsx
 * bench/cpu-per-process.ts ...` (perf samples only time on the CPU; `--perf-basic-prof` names the
 * JavaScript frames). Not V8's `--cpu-prof` here: with several processes on one CPU it charges the
 * time a process waits for the CPU to whatever it was running when it lost it. To compare two builds
 * of the library whatever the machine's noise, count instructions with `node --jitless` under
 * callgrind (no compiler decisions to vary between runs; interpreted code weighs more than it does
 * optimised, so read it as "less work or not", not as a speed-up).
 */
import { fork, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import Redis from 'ioredis';
import {
  CONTENDER_IDS,
  createContender,
  OURS,
  TURN_TIME_ENV,
  type Contender,
  type ContenderId,
} from './lib/contenders';
import { startTopology, stopTopology } from '../scripts/redis-topology';
import { sleep } from '../scripts/tooling';
import { PRIVATE_PORTS } from '../scripts/test-ports';

const BASE_PORT = PRIVATE_PORTS.benchCpuPerProcess.base;
const KEY = 'cpu:hot';
const COUNTER = 'cpu:counter';
const env = process.env;
const list = (value: string | undefined, fallback: string): string[] => (value ?? fallback).split(',');

type ToWorker = { type: 'go' } | { type: 'stop' };
type FromWorker = { type: 'ready' } | { type: 'done'; acquisitions: number };

type TrialContender = Pick<Contender, 'acquire' | 'ready' | 'close'>;

/** One contender on `port`, connections ready. */
async function contenderOn(port: number, id: ContenderId): Promise<{ redis: Redis; contender: TrialContender }> {
  const redis = new Redis({ host: '127.0.0.1', port });
  const contender = createContender(id, redis);
  await contender.ready();
  return { redis, contender };
}

/** One acquisition as every loop here makes it: acquire, MGET the counter, sleep `sectionMs`, MSET it + 1 with the release. */
async function acquireOnce(redis: Redis, contender: TrialContender, sectionMs: number): Promise<void> {
  const release = await contender.acquire(KEY);
  const [value] = await redis.mget(COUNTER);
  if (sectionMs > 0) await sleep(sectionMs);
  await Promise.all([redis.mset(COUNTER, String(Number(value ?? 0) + 1)), release()]);
}

/** One worker: `node bench/cpu-per-process.ts worker <port> <contender> <sectionMs>`. */
async function worker(port: number, id: ContenderId, sectionMs: number): Promise<void> {
  const { redis, contender } = await contenderOn(port, id);
  let stop = false;
  let acquisitions = 0;
  process.on('message', (message: ToWorker) => {
    if (message.type === 'stop') stop = true;
  });
  const go = new Promise((resolve) => process.once('message', resolve));
  process.send?.({ type: 'ready' } satisfies FromWorker);
  await go;
  while (!stop) {
    await acquireOnce(redis, contender, sectionMs);
    acquisitions++;
  }
  process.send?.({ type: 'done', acquisitions } satisfies FromWorker);
  await contender.close();
  redis.disconnect();
  process.disconnect?.();
}

/** `iterations` uncontended acquire + release cycles of contender `id` (see the header). */
async function loop(id: ContenderId, iterations: number, port: number): Promise<void> {
  const { redis, contender } = await contenderOn(port, id);
  for (let i = 0; i < iterations; i++) await (await contender.acquire(KEY))();
  await contender.close();
  redis.disconnect();
}

/** `in-turn` (see the header): one forked process per measurement, so no contender inherits another's compiled code. */
function inTurn(port: number, id: ContenderId): Promise<string> {
  const child = fork(__filename, ['in-turn-worker', String(port), id], {
    execArgv: process.execArgv,
    env: { ...process.env, [TURN_TIME_ENV]: '60000' },
  });
  return new Promise((resolve, reject) => {
    child.once('message', (line: string) => resolve(line));
    child.once('exit', (code) => reject(new Error(`in-turn worker for ${id} exited with ${code}`)));
  });
}

async function inTurnWorker(port: number, id: ContenderId): Promise<void> {
  const looping = await contenderOn(port, id);
  const waiting = await contenderOn(port, id);
  const { redis } = looping;
  await redis.del(COUNTER);
  const stop = new AbortController();
  const first = await looping.contender.acquire(KEY);
  let waiterGrants = 0;
  const waiter = (async () => {
    // Takes the lock when it comes its way and gives it back. Ours get it when a turn ends early (the
    // loop paused past its next macrotask); the waiter asks again only after 5 ms, so its own turn passes
    // the lock straight back, and the loop's turn stays contended. A polling lock's loop runs the same
    // path whether anyone waits or not, and a poller that asked again at once would take every other
    // grant: it pauses 100 ms first.
    const pause = OURS.has(id as ContenderId) ? () => sleep(5) : () => sleep(100);
    while (!stop.signal.aborted) {
      const release = await waiting.contender.acquire(KEY, stop.signal).catch(() => undefined);
      if (!release) return;
      waiterGrants++;
      await release();
      await pause();
    }
  })();
  await sleep(50); // the waiter has been refused: the loop's turn is contended from here on
  await first();
  const iterate = async (count: number) => {
    for (let i = 0; i < count; i++) await acquireOnce(redis, looping.contender, 0);
  };
  const iterations = Number(env.ITERATIONS ?? 20_000);
  await iterate(iterations / 4); // warm-up
  const grantsBefore = waiterGrants;
  const cpuBefore = process.cpuUsage();
  const startedAt = process.hrtime.bigint();
  await iterate(iterations);
  const cpu = process.cpuUsage(cpuBefore);
  const wallUs = Number(process.hrtime.bigint() - startedAt) / 1_000;
  const perIteration = (us: number) => (us / iterations).toFixed(0);
  process.send?.(
    `${id.padEnd(14)} in a contended turn: CPU per acquisition ${perIteration(cpu.user + cpu.system)} µs ` +
      `(user ${perIteration(cpu.user)}, system ${perIteration(cpu.system)}), ${perIteration(wallUs)} µs apart; ` +
      `the waiting client took the lock ${waiterGrants - grantsBefore} times meanwhile`,
  );
  stop.abort();
  await waiter;
  await Promise.all([looping.contender.close(), waiting.contender.close()]);
  process.exit(0);
}

interface CpuSample {
  mainTicks: number;
  otherTicks: number;
  voluntarySwitches: number;
}

/** user + system clock ticks of the main thread and of the other threads, and voluntary context switches. */
function cpuOf(pid: number): CpuSample {
  let mainTicks = 0;
  let otherTicks = 0;
  for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
    const fields = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8').split(') ')[1].split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]);
    if (Number(tid) === pid) mainTicks += ticks;
    else otherTicks += ticks;
  }
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return { mainTicks, otherTicks, voluntarySwitches: Number(/^voluntary_ctxt_switches:\s+(\d+)/m.exec(status)![1]) };
}

function commandCounts(commandstats: string): Map<string, number> {
  const counts = new Map<string, number>();
  for (const match of commandstats.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) counts.set(match[1], Number(match[2]));
  return counts;
}

async function measure(port: number, id: ContenderId, processes: number, sectionMs: number): Promise<string> {
  const admin = new Redis({ host: '127.0.0.1', port });
  await admin.del(COUNTER);
  const workers: ChildProcess[] = Array.from({ length: processes }, () =>
    fork(__filename, ['worker', String(port), id, String(sectionMs)], { execArgv: process.execArgv }),
  );
  try {
    const next = (child: ChildProcess) => new Promise<FromWorker>((resolve) => child.once('message', resolve));
    await Promise.all(workers.map(next));
    workers.forEach((child) => child.send({ type: 'go' } satisfies ToWorker));
    await sleep(Number(env.WARMUP_MS ?? 5_000));
    await admin.config('RESETSTAT');
    const counterBefore = Number(await admin.get(COUNTER));
    const before = workers.map((child) => cpuOf(child.pid!));
    const startedAt = Date.now();
    await sleep(Number(env.DURATION_MS ?? 6_000));
    const after = workers.map((child) => cpuOf(child.pid!));
    const windowS = (Date.now() - startedAt) / 1000;
    const inWindow = Number(await admin.get(COUNTER)) - counterBefore;
    const commands = commandCounts(await admin.info('commandstats'));
    const done = workers.map(next);
    workers.forEach((child) => child.send({ type: 'stop' } satisfies ToWorker));
    const total = (await Promise.all(done)).reduce((sum, m) => sum + (m.type === 'done' ? m.acquisitions : 0), 0);
    const lost = total - Number(await admin.get(COUNTER));
    const tickUs = 1_000_000 / 100; // USER_HZ
    const sum = (pick: (s: CpuSample) => number) => after.reduce((acc, s, i) => acc + pick(s) - pick(before[i]), 0);
    const perAcq = (ticks: number) => ((ticks * tickUs) / inWindow).toFixed(0);
    // The critical section's and this script's own commands left out; Redis 7 also counts the ones scripts run.
    const ignored = new Set(['mget', 'mset', 'info', 'config|resetstat']);
    const lockCommands = [...commands]
      .filter(([name]) => !ignored.has(name))
      .map(([name, calls]) => `${name} ${(calls / inWindow).toFixed(2)}`)
      .join(', ');
    return (
      `${id.padEnd(9)} ${String(processes).padStart(2)} processes: ${(inWindow / windowS).toFixed(0)}/s, ` +
      `CPU per acquisition ${perAcq(sum((s) => s.mainTicks))} µs main thread + ${perAcq(sum((s) => s.otherTicks))} µs other threads, ` +
      `${(sum((s) => s.voluntarySwitches) / inWindow).toFixed(2)} context switches, lost ${lost}; per acquisition: ${lockCommands}`
    );
  } finally {
    for (const child of workers) if (child.exitCode === null) child.kill();
    admin.disconnect();
  }
}

async function main(): Promise<void> {
  if (process.argv[2] === 'worker') {
    const [port, id, sectionMs] = process.argv.slice(3);
    return worker(Number(port), id as ContenderId, Number(sectionMs));
  }
  if (process.argv[2] === 'loop') {
    const [id, iterations, port] = process.argv.slice(3);
    return loop(id as ContenderId, Number(iterations), Number(port));
  }
  if (process.argv[2] === 'in-turn-worker') {
    const [port, id] = process.argv.slice(3);
    return inTurnWorker(Number(port), id as ContenderId);
  }
  if (!fs.existsSync('/proc/self/task')) throw new Error('bench/cpu-per-process.ts reads /proc: Linux only.');
  const ids = list(env.CONTENDERS, 'reentrant,redlock,raw') as ContenderId[];
  for (const id of ids) {
    if (!CONTENDER_IDS.includes(id)) throw new Error(`CONTENDERS: unknown ${id} (${CONTENDER_IDS.join(', ')})`);
  }
  const counts = list(env.PROCESSES, '1,2,4,8').map(Number);
  const sectionMs = Number(env.SECTION_MS ?? 1);
  const topology = await startTopology('single', { basePort: BASE_PORT });
  try {
    const port = topology.masters[0].port;
    if (process.argv[2] === 'in-turn') {
      for (let round = 0; round < Number(env.ROUNDS ?? 1); round++) {
        for (const id of ids) console.log(await inTurn(port, id));
      }
      return;
    }
    for (let round = 0; round < Number(env.ROUNDS ?? 1); round++) {
      for (const processes of counts) {
        for (const id of ids) console.log(await measure(port, id, processes, sectionMs));
      }
    }
  } finally {
    await stopTopology(topology);
  }
}

main().catch((error: Error) => {
  console.error(error.stack ?? error.message);
  process.exit(1);
});
