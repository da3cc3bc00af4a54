/**
 * One OS process of the RedLock scenario's contended measurement (bench/scenarios/red-lock.ts), started
 * with an IPC channel. It builds both contenders over its own connections to the masters
 * (BENCH_REDLOCK_PORTS) and, when told, loops on one lock name with one of them; each critical section
 * is a racy read-modify-write of a counter on the first master (GET, a `sectionMs` sleep, SET), so two
 * holders at once would lose an update.
 */
import { nowMs } from './lib/clock';
import { createRedLockSubject, mastersAt, RED_LOCK_SUBJECTS, type RedLockSubject } from './lib/red-lock-subjects';
import type { FromRedLockWorker, ToRedLockWorker } from './lib/red-lock-protocol';
import { sleep } from '../scripts/tooling';

const ports = process.env.BENCH_REDLOCK_PORTS!.split(',').map(Number);
/** Each contender has connections of its own; the counter has one more. */
const connections = RED_LOCK_SUBJECTS.map(() => mastersAt(ports));
const subjects = new Map(RED_LOCK_SUBJECTS.map((id, i) => [id, createRedLockSubject(id, connections[i])]));
const [counterRedis] = mastersAt(ports.slice(0, 1));

interface Run {
  subject: RedLockSubject;
  stop: AbortController;
  loop: Promise<void>;
  total: number;
  giveUpsBefore: number;
  grants: { at: number; wait: number }[];
  markedAt?: { at: number; cpu: NodeJS.CpuUsage; giveUps: number };
}
let run: Run | undefined;

const send = (message: FromRedLockWorker): void => void process.send?.(message);

async function lockLoop(r: Run, name: string, counterKey: string, sectionMs: number): Promise<void> {
  while (!r.stop.signal.aborted) {
    const requested = nowMs();
    let release;
    try {
      release = await r.subject.acquire(name, r.stop.signal);
    } catch (error) {
      if (r.stop.signal.aborted) return;
      throw error;
    }
    const at = nowMs();
    try {
      const value = Number(await counterRedis.get(counterKey));
      await sleep(sectionMs);
      await counterRedis.set(counterKey, String(value + 1));
      r.total++;
      r.grants.push({ at, wait: at - requested });
    } finally {
      await release();
    }
  }
}

process.on('message', (message: ToRedLockWorker) => {
  void handle(message).catch((error: unknown) => {
    send({ type: 'error', message: error instanceof Error ? (error.stack ?? error.message) : String(error) });
  });
});

async function handle(message: ToRedLockWorker): Promise<void> {
  switch (message.type) {
    case 'run': {
      const subject = subjects.get(message.subject)!;
      const r: Run = {
        subject,
        stop: new AbortController(),
        loop: Promise.resolve(),
        total: 0,
        giveUpsBefore: subject.giveUps,
        grants: [],
      };
      r.loop = lockLoop(r, message.name, message.counterKey, message.sectionMs);
      run = r;
      send({ type: 'started' });
      await r.loop.catch((error: unknown) => {
        send({ type: 'error', message: error instanceof Error ? (error.stack ?? error.message) : String(error) });
      });
      return;
    }
    case 'mark':
      if (run) run.markedAt = { at: nowMs(), cpu: process.cpuUsage(), giveUps: run.subject.giveUps };
      send({ type: 'marked' });
      return;
    case 'stop': {
      const r = run!;
      const stoppedAt = nowMs();
      const cpu = process.cpuUsage(r.markedAt?.cpu);
      const giveUps = r.subject.giveUps - (r.markedAt?.giveUps ?? r.giveUpsBefore);
      r.stop.abort();
      await r.loop.catch(() => undefined);
      const from = r.markedAt?.at ?? Infinity;
      const inWindow = r.grants.filter((g) => g.at >= from && g.at < stoppedAt);
      run = undefined;
      send({
        type: 'result',
        result: {
          pid: process.pid,
          total: r.total,
          inWindow: inWindow.length,
          waits: inWindow.map((g) => g.wait),
          cpuMs: (cpu.user + cpu.system) / 1000,
          giveUps,
        },
      });
      return;
    }
    case 'exit':
      await Promise.all([...subjects.values()].map((s) => s.close().catch(() => undefined)));
      process.exit(0);
  }
}

// Exit with the bench: its IPC channel closing means it is gone.
process.on('disconnect', () => process.exit(0));
void Promise.all([counterRedis, ...connections.flat()].map((redis) => redis.ping())).then(() =>
  send({ type: 'ready', pid: process.pid }),
);
