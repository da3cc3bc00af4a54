/**
 * Watchdog cost: hold `watchdogLocks` reentrant locks with the watchdog (no leaseTime) in one
 * client, then call `engineOf(locks).watchdog.tick()` by hand and measure round trips (standalone commands
 * plus pipelines), commands, wall time, client CPU and Redis CPU per tick.
 */
import Redis from 'ioredis';
import type { LockHandle } from '../../lib';
import { engineOf, LockClient } from '../lib/subject';
import { nowMs } from '../lib/clock';
import type { BenchContext } from '../lib/context';
import { countCommands, diff, serverCpuSeconds, snapshot } from '../lib/redis-stats';
import { median } from '../lib/stats';

export interface WatchdogResult {
  locks: number;
  ticks: number;
  /** Medians per tick. */
  roundTrips: number;
  pipelines: number;
  commands: number;
  wallMs: number;
  clientCpuMs: number;
  redisCpuMs: number;
  acquireAllMs: number;
  /** Locks still held by Redis's count after the ticks (all renewed, none lost). */
  heldAfter: number;
  lost: number;
}

/**
 * The watchdog's own timer ticks every watchdogTimeout / 3. It is set long (10 min) here so that
 * timer never fires during the measurement: a timer tick in flight would make a manual tick() return
 * at once and read as free. The renewal work per tick does not depend on the lease length.
 */
const WATCHDOG_TIMEOUT_MS = 600_000;

export async function runWatchdog(ctx: BenchContext): Promise<WatchdogResult> {
  const { watchdogLocks: n, watchdogTicks: ticks } = ctx.config;
  const redis = new Redis({ port: ctx.port, host: '127.0.0.1' });
  const locks = new LockClient({ redis, keyPrefix: 'bench', watchdogTimeout: WATCHDOG_TIMEOUT_MS });
  let lost = 0;
  locks.on('lockLost', () => lost++);
  const counter = countCommands(redis);
  const handles: LockHandle[] = [];
  try {
    const started = nowMs();
    const batch = 500;
    for (let i = 0; i < n; i += batch) {
      const size = Math.min(batch, n - i);
      const got = await Promise.all(
        Array.from({ length: size }, (_, j) => locks.getLock(`${ctx.tag}:wd:${i + j}`).lock()),
      );
      handles.push(...got);
    }
    const acquireAllMs = nowMs() - started;
    if (engineOf(locks).watchdog.size !== n)
      throw new Error(`expected ${n} watched locks, the watchdog has ${engineOf(locks).watchdog.size}`);

    await engineOf(locks).watchdog.tick(); // warm-up: loads the renew script, sizes buffers
    const samples: Pick<
      WatchdogResult,
      'roundTrips' | 'pipelines' | 'commands' | 'wallMs' | 'clientCpuMs' | 'redisCpuMs'
    >[] = [];
    for (let t = 0; t < ticks; t++) {
      const redisBefore = await serverCpuSeconds(ctx.admin);
      const before = snapshot(counter);
      const cpu = process.cpuUsage();
      const t0 = nowMs();
      await engineOf(locks).watchdog.tick();
      const wallMs = nowMs() - t0;
      const used = process.cpuUsage(cpu);
      const sent = diff(snapshot(counter), before);
      const redisAfter = await serverCpuSeconds(ctx.admin);
      samples.push({
        roundTrips: sent.requests,
        pipelines: sent.pipelines,
        commands: sent.commands,
        wallMs,
        clientCpuMs: (used.user + used.system) / 1000,
        redisCpuMs: (redisAfter - redisBefore) * 1000,
      });
      ctx.log(
        `  watchdog tick ${t + 1}: ${sent.requests} round trip(s), ${sent.pipelines} pipeline(s), ${sent.commands} commands, ${wallMs.toFixed(1)} ms wall, client CPU ${((used.user + used.system) / 1000).toFixed(1)} ms, Redis CPU ${((redisAfter - redisBefore) * 1000).toFixed(1)} ms`,
      );
    }
    const heldAfter = await countHeld(redis, `bench:{${ctx.tag}:wd:*}`);
    const pick = (k: keyof (typeof samples)[number]): number => median(samples.map((s) => s[k]));
    return {
      locks: n,
      ticks,
      roundTrips: pick('roundTrips'),
      pipelines: pick('pipelines'),
      commands: pick('commands'),
      wallMs: pick('wallMs'),
      clientCpuMs: pick('clientCpuMs'),
      redisCpuMs: pick('redisCpuMs'),
      acquireAllMs,
      heldAfter,
      lost,
    };
  } finally {
    await locks.close();
    redis.disconnect();
  }
}

async function countHeld(redis: Redis, pattern: string): Promise<number> {
  let cursor = '0';
  let count = 0;
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    cursor = next;
    count += keys.length;
  } while (cursor !== '0');
  return count;
}
