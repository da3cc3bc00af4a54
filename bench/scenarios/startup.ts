/**
 * Start-up race (not in the list; added because the bench tripped over it): a burst of
 * lock() calls on one name from a LockClient whose pub/sub connection is still starting.
 *
 * - natural: a new LockClient, built the default way, gets BURST concurrent lock() calls at once
 *   (each holds HOLD_MS), as an app might right after start; repeated `trials` times;
 * - forced: the same, but a waiter of this process joins the lock's channel at the very moment the
 *   pub/sub connection emits 'connect' (TCP up, ioredis's ready check not done). The connection is
 *   the `redis.duplicate()` in a RedisPubSub that LockClient makes by default, built here only to see
 *   its events; the join goes through the client's own LockWaiters.
 *
 * A burst normally takes BURST × (HOLD_MS + a few round trips). When the unlock messages are lost,
 * every waiter sleeps until the holder's lease runs out (LEASE_MS here, 30 s by default).
 */
import Redis from 'ioredis';
import type { ReentrantLock } from '../../lib';
import { engineOf, LockClient, lockKeys, RedisPubSub } from '../lib/subject';
import { silentLogger, sleep } from '../../scripts/tooling';
import { nowMs } from '../lib/clock';
import type { BenchContext } from '../lib/context';
import { median } from '../lib/stats';

export interface StartupCase {
  trials: number;
  /** Time for the whole burst to get and release the lock, per trial, ms. */
  spans: number[];
  /** Trials whose burst took longer than one lease: unlock messages were lost. */
  stalled: number;
  medianSpanMs: number;
  worstSpanMs: number;
  /** forced only: server-side subscribers of the lock channel while the burst waited (PUBSUB NUMSUB). */
  serverSubscribers?: number[];
}

export interface StartupResult {
  burst: number;
  holdMs: number;
  leaseMs: number;
  natural: StartupCase;
  forced: StartupCase;
}

const BURST = 4;
const HOLD_MS = 2;
/** Short lease so a lost wake-up costs ~0.5 s per waiter here instead of the default 30 s. */
const LEASE_MS = 500;

async function burst(lock: ReentrantLock): Promise<number> {
  const started = nowMs();
  await Promise.all(
    Array.from({ length: BURST }, async () => {
      const handle = await lock.lock();
      await sleep(HOLD_MS);
      await handle.release();
    }),
  );
  return nowMs() - started;
}

function summarise(spans: number[], serverSubscribers?: number[]): StartupCase {
  return {
    trials: spans.length,
    spans,
    stalled: spans.filter((s) => s > LEASE_MS).length,
    medianSpanMs: median(spans),
    worstSpanMs: Math.max(...spans),
    ...(serverSubscribers ? { serverSubscribers } : {}),
  };
}

export async function runStartup(ctx: BenchContext): Promise<StartupResult> {
  const redis = new Redis({ port: ctx.port, host: '127.0.0.1' });
  await redis.ping();
  const natural: number[] = [];
  const forced: number[] = [];
  const subscribers: number[] = [];
  try {
    for (let i = 0; i < (ctx.config.quick ? 15 : 30); i++) {
      const locks = new LockClient({ redis, keyPrefix: 'bench', watchdogTimeout: LEASE_MS, logger: silentLogger });
      natural.push(await burst(locks.getLock(`${ctx.tag}:startup:n${i}`)));
      await locks.close();
    }
    for (let i = 0; i < (ctx.config.quick ? 2 : 3); i++) {
      const connection = redis.duplicate();
      connection.on('error', () => undefined); // the race makes ioredis emit one; it is what is measured
      const connected = new Promise((resolve) => connection.once('connect', resolve));
      const locks = new LockClient({
        redis,
        keyPrefix: 'bench',
        watchdogTimeout: LEASE_MS,
        logger: silentLogger,
        pubsub: new RedisPubSub(connection, false, true),
      });
      const name = `${ctx.tag}:startup:f${i}`;
      const channel = lockKeys('bench', name).channel;
      await connected;
      const { ticket, subscribed } = engineOf(locks).waiters.join(channel);
      await subscribed.catch(() => undefined);
      const sampled = sleep(LEASE_MS / 2).then(() => redis.pubsub('NUMSUB', channel)) as Promise<[string, number]>;
      forced.push(await burst(locks.getLock(name)));
      subscribers.push(Number((await sampled)[1]));
      ticket.leave();
      await locks.close();
    }
  } finally {
    redis.disconnect();
  }
  const result: StartupResult = {
    burst: BURST,
    holdMs: HOLD_MS,
    leaseMs: LEASE_MS,
    natural: summarise(natural),
    forced: summarise(forced, subscribers),
  };
  ctx.log(
    `  start-up (natural): ${result.natural.stalled} of ${result.natural.trials} bursts stalled; spans ${natural.map((w) => w.toFixed(0)).join(', ')} ms`,
  );
  ctx.log(
    `  start-up (forced): ${result.forced.stalled} of ${result.forced.trials} stalled; spans ${forced.map((w) => w.toFixed(0)).join(', ')} ms; server subscribers ${subscribers.join(', ')}`,
  );
  return result;
}
