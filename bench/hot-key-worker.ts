/**
 * One OS process of the hot-key and many-waiters scenarios, started by bench/run.ts with an IPC
 * channel. It runs `loops` lock loops on one key; each critical section is a racy read-modify-write
 * of a counter (MGET, then a `sectionMs` sleep if asked for, then MSET, so any overlap of two
 * holders loses an update) that also records the release time for the next holder's hand-off
 * measurement. MGET/MSET are used only here, so
 * INFO commandstats can tell them from lock traffic.
 */
import { setMaxListeners } from 'node:events';
import Redis from 'ioredis';
import { nowMs } from './lib/clock';
import { createContender, type Contender } from './lib/contenders';
import {
  counterKey,
  insideKey,
  releasedAtKey,
  type FromWorker,
  type SharedSection,
  type ToWorker,
  type WorkerResult,
} from './lib/protocol';
import { countCommands, diff, snapshot, type CommandCounter } from './lib/redis-stats';
import { startWindowProfile, stopWindowProfile } from './lib/window-profiler';

const port = Number(process.env.BENCH_REDIS_PORT);
const redis = new Redis({ port, host: '127.0.0.1' });
const sent = countCommands(redis);

interface Run {
  contender: Contender;
  key: string;
  /** Sleep inside each critical section, between the MGET and the MSET (0: none). */
  sectionMs: number;
  /** Set for locks with several holders: the section counts who is inside instead (see SharedSection). */
  shared?: SharedSection;
  maxInside: number;
  overLimit: number;
  stop: AbortController;
  loops: Promise<void>[];
  total: number;
  grants: { at: number; wait: number; handoff: number; fromOtherProcess: boolean }[];
  /** Requests sent by the critical sections (MGET + MSET each), to tell them from lock traffic. */
  csRequests: number;
  markedAt?: { sent: CommandCounter; csRequests: number; cpu: NodeJS.CpuUsage };
}
let run: Run | undefined;

function send(message: FromWorker): void {
  process.send?.(message);
}

async function lockLoop(r: Run): Promise<void> {
  const counter = counterKey(r.key);
  const releasedAt = releasedAtKey(r.key);
  while (!r.stop.signal.aborted) {
    const requested = nowMs();
    let release;
    try {
      release = await r.contender.acquire(r.key, r.stop.signal);
    } catch (error) {
      if (r.stop.signal.aborted) return;
      throw error;
    }
    const granted = nowMs();
    if (r.stop.signal.aborted) {
      await release();
      return;
    }
    if (r.shared) {
      await sharedSection(r);
      r.total++;
      r.csRequests += 2;
      await release();
      r.grants.push({ at: granted, wait: granted - requested, handoff: NaN, fromOtherProcess: false });
      continue;
    }
    const [value, lastRelease] = await redis.mget(counter, releasedAt);
    const [releasedAtMs, releasedBy] = (lastRelease ?? '').split('|');
    if (r.sectionMs > 0) await new Promise((resolve) => setTimeout(resolve, r.sectionMs));
    // Not awaited: the connection keeps order, so the write lands before the release below.
    const write = redis.mset(counter, String(Number(value ?? 0) + 1), releasedAt, `${nowMs()}|${process.pid}`);
    r.total++;
    r.csRequests += 2;
    await Promise.all([write, release()]);
    r.grants.push({
      at: granted,
      wait: granted - requested,
      handoff: lastRelease ? granted - Number(releasedAtMs) : NaN,
      fromOtherProcess: lastRelease !== null && Number(releasedBy) !== process.pid,
    });
  }
}

/** INCR the holders inside, check them against the limit, sleep, DECR (INCR/DECR: only used here). */
async function sharedSection(r: Run): Promise<void> {
  const inside = await redis.incr(insideKey(r.key));
  r.maxInside = Math.max(r.maxInside, inside);
  if (r.shared?.limit !== undefined && inside > r.shared.limit) r.overLimit++;
  if (r.sectionMs > 0) await new Promise((resolve) => setTimeout(resolve, r.sectionMs));
  await redis.decr(insideKey(r.key));
}

async function handle(message: ToWorker): Promise<void> {
  switch (message.type) {
    case 'run': {
      const counted: CommandCounter = sent;
      const contender = createContender(message.contender, redis, {
        onConnection: (c) => void countCommands(c, counted),
      });
      await contender.ready();
      const r: Run = {
        contender,
        key: message.key,
        sectionMs: message.sectionMs ?? 0,
        shared: message.shared,
        maxInside: 0,
        overLimit: 0,
        stop: new AbortController(),
        loops: [],
        total: 0,
        grants: [],
        csRequests: 0,
      };
      // Every loop of this worker waits with the same stop signal (up to ~125 at once).
      setMaxListeners(0, r.stop.signal);
      run = r;
      for (let i = 0; i < message.loops; i++) {
        r.loops.push(
          lockLoop(r).catch((error: Error) => {
            send({ type: 'error', message: `${message.contender} loop: ${error.stack ?? error.message}` });
            process.exit(1);
          }),
        );
      }
      send({ type: 'started' });
      return;
    }
    case 'mark':
      await startWindowProfile();
      if (run) run.markedAt = { sent: snapshot(sent), csRequests: run.csRequests, cpu: process.cpuUsage() };
      send({ type: 'marked' });
      return;
    case 'stop': {
      const r = run;
      if (!r) throw new Error('stop without run');
      const stoppedAt = snapshot(sent);
      const cpu = process.cpuUsage(r.markedAt?.cpu);
      await stopWindowProfile(r.key.replace(/[^\w-]+/g, '_'));
      const csRequests = r.csRequests - (r.markedAt?.csRequests ?? r.csRequests);
      r.stop.abort();
      await Promise.all(r.loops);
      await r.contender.close();
      run = undefined;
      const inWindow = r.grants.filter((g) => g.at >= message.windowStart && g.at <= message.windowEnd);
      const result: WorkerResult = {
        pid: process.pid,
        total: r.total,
        inWindow: inWindow.length,
        waits: inWindow.map((g) => g.wait),
        handoffs: inWindow.map((g) => g.handoff).filter((h) => Number.isFinite(h)),
        crossHandoffs: inWindow.filter((g) => g.fromOtherProcess).map((g) => g.handoff),
        sent: diff(stoppedAt, r.markedAt?.sent ?? stoppedAt),
        csRequests,
        cpuMs: r.markedAt ? (cpu.user + cpu.system) / 1000 : 0,
        giveUps: r.contender.giveUps,
        maxInside: r.maxInside,
        overLimit: r.overLimit,
      };
      send({ type: 'result', result });
      return;
    }
    case 'exit':
      redis.disconnect();
      process.disconnect?.();
      return;
  }
}

process.on('message', (message: ToWorker) => {
  handle(message).catch((error: Error) => {
    send({ type: 'error', message: error.stack ?? error.message });
    process.exit(1);
  });
});
// The parent went away (Ctrl-C, crash): never outlive it.
process.on('disconnect', () => {
  redis.disconnect();
  process.exit(0);
});

redis
  .ping()
  .then(() => send({ type: 'ready', pid: process.pid }))
  .catch((error: Error) => {
    send({ type: 'error', message: `cannot reach Redis on ${port}: ${error.message}` });
    process.exit(1);
  });
