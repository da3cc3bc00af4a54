import { monotonicNow } from '../util/clock';
import { MAX_TIMER_MS } from '../util/long-timer';
import type { ChainableCommander } from 'ioredis';
import { bounded } from '../redis/bounded';
import { writesToFixedServer } from '../redis/fixed-server';
import { RedisRefusedError, refusalCode, type LockLostReason } from '../errors';
import type { HeldLock } from './held-lock';
import type { LockLogger } from '../util/logger';
import type { RedisClient } from '../redis/redis-client';
import { slotThrough } from '../redis/cluster-slot';
import { RENEW_MANY } from '../scripts/catalog';
import { registerScripts } from '../scripts/loader';

/**
 * One ticker per client renews every watched lock, every `watchdogTimeout / 3`, in one pipeline of
 * batched renewal scripts (one round trip however many locks are held). Its timer never keeps the process alive and runs only
 * while something is watched.
 */
export class Watchdog {
  private readonly watched = new Set<HeldLock>();
  private timer?: NodeJS.Timeout;
  /** Fires when the earliest watched lease must be taken for over (see checkDeadlines). */
  private deadlineTimer?: NodeJS.Timeout;
  /** Why the last renewal of a hold failed while its lease still ran: how its loss is told at the deadline. */
  private readonly failures = new WeakMap<HeldLock, LockLostReason>();
  private ticking = false;
  /** When the last round of renewals was answered (or first became due). */
  private lastRenewedAt = monotonicNow();

  constructor(
    private readonly client: RedisClient,
    private readonly intervalMs: number,
    private readonly operationTimeout: number,
    private readonly logger: LockLogger,
    /** How long a renewed name's fencing counter outlives the lease (see LockClientOptions.idleKeyTtl). */
    private readonly idleKeyTtl: number,
    /** After each tick: how many renewals Redis confirmed and how many failed (lost or unreachable). */
    private readonly onTick: (renewed: number, failed: number) => void = () => undefined,
  ) {}

  get size(): number {
    return this.watched.size;
  }

  /**
   * How far the renewals are behind schedule, ms: 0 when nothing is watched or the last round was
   * answered within an interval. More than an interval means a blocked event loop or a Redis that
   * does not answer renewals: watched leases are running down.
   */
  get lagMs(): number {
    if (this.watched.size === 0) return 0;
    return Math.max(0, monotonicNow() - this.lastRenewedAt - this.intervalMs);
  }

  watch(lock: HeldLock): void {
    if (this.watched.size === 0) this.lastRenewedAt = monotonicNow();
    this.watched.add(lock);
    if (!this.deadlineTimer) this.armDeadline();
    if (!this.timer) {
      this.timer = setInterval(() => void this.tick(), this.intervalMs);
      this.timer.unref();
    }
  }

  /** The interval is stopped by the next tick that finds nothing watched, not here: a lock taken and
   * released in a loop would otherwise create and clear an interval every time. */
  unwatch(lock: HeldLock): void {
    this.watched.delete(lock);
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    clearTimeout(this.deadlineTimer);
    this.deadlineTimer = undefined;
  }

  close(): void {
    this.watched.clear();
    this.stop();
  }

  /** Renews everything watched now. Exposed for tests and for `extend()`-like callers. */
  async tick(): Promise<void> {
    if (this.watched.size === 0) return this.stop();
    if (this.ticking) return;
    this.ticking = true;
    const batch = [...this.watched];
    const sentAt = monotonicNow();
    this.armDeadline();
    try {
      const readOnlyIsFinal = writesToFixedServer(this.client);
      const describe = { name: 'watchdog renewal', readOnlyIsFinal };
      const results = await bounded(this.renewAll(batch), this.operationTimeout, describe);
      batch.forEach((lock, i) => this.apply(lock, results[i], sentAt));
      this.lastRenewedAt = monotonicNow();
      const renewed = results.filter((r) => r === 1).length;
      this.onTick(renewed, batch.length - renewed);
    } catch (error) {
      this.logger.warn(`Lock renewal failed for ${batch.length} lock(s): ${(error as Error).message}`);
      batch.forEach((lock) => this.apply(lock, error as Error, sentAt));
      this.onTick(0, batch.length);
    } finally {
      this.ticking = false;
      this.armDeadline();
    }
  }

  /**
   * A hold whose renewals get no answer (Redis cut off, or slower than the lease) must stop before
   * Redis can let its lease run out, not when the renewal in flight finally fails: at its expiresAt
   * (see leaseEnd), checked by one timer for the earliest watched lease, armed again at every tick.
   */
  private armDeadline(): void {
    clearTimeout(this.deadlineTimer);
    this.deadlineTimer = undefined;
    let earliest = Infinity;
    for (const lock of this.watched) if (lock.expiresAt < earliest) earliest = lock.expiresAt;
    if (earliest === Infinity) return;
    // At most setTimeout's limit (a longer delay fires after 1 ms, and re-armed would spin): a hold
    // whose lease ends later than that is looked at again then.
    const delay = Math.min(MAX_TIMER_MS, Math.max(0, earliest - monotonicNow()));
    this.deadlineTimer = setTimeout(() => this.checkDeadlines(), delay);
    this.deadlineTimer.unref();
  }

  private checkDeadlines(): void {
    this.deadlineTimer = undefined;
    const now = monotonicNow();
    for (const lock of [...this.watched]) {
      if (now >= lock.expiresAt) lock.markLost(this.failures.get(lock) ?? 'unreachable');
    }
    this.armDeadline();
  }

  private apply(lock: HeldLock, result: number | Error | undefined, sentAt: number): void {
    if (!this.watched.has(lock)) return; // released (or re-acquired) while the renewal was in flight
    if (result === 1) {
      this.failures.delete(lock);
      lock.leaseSet(sentAt, lock.leaseMs);
      lock.onRenewed?.(sentAt, lock.leaseMs);
    } else if (result === 0) {
      lock.markLost('not-owner');
    } else {
      // Redis answered and refused (a demoted server, full memory...): say so, not "unreachable".
      const refused = result instanceof RedisRefusedError || refusalCode(result, writesToFixedServer(this.client));
      if (monotonicNow() >= lock.expiresAt) lock.markLost(refused ? 'refused' : 'unreachable');
      else this.failures.set(lock, refused ? 'refused' : 'unreachable');
    }
  }

  /**
   * Renews `batch` with `renew-many` calls of up to RENEWALS_PER_CALL locks: all in one pipeline on a
   * standalone client; on a Cluster one call per slot group (a script's keys must share a slot), which
   * ioredis writes to each node back to back.
   */
  private async renewAll(batch: HeldLock[]): Promise<(number | Error)[]> {
    registerScripts(this.client);
    const indexes = batch.map((_, i) => i);
    const groups = this.client.isCluster ? groupBy(indexes, (i) => slotThrough(this.client, batch[i].key)) : [indexes];
    const calls = groups.flatMap((group) => chunks(group, RENEWALS_PER_CALL));
    const argumentsOf = (call: number[]): [string[], (string | number)[]] => [
      call.flatMap((i) => batch[i].renewalKeys),
      [this.idleKeyTtl, ...call.flatMap((i) => [batch[i].renewal, batch[i].leaseMs, batch[i].owner])],
    ];
    let replies: (number[] | Error)[];
    if (this.client.isCluster) {
      replies = await Promise.all(
        calls.map((call) => RENEW_MANY.run(this.client, ...argumentsOf(call)).catch((error: Error) => error)),
      );
    } else {
      const pipeline: ChainableCommander = this.client.pipeline();
      for (const call of calls) RENEW_MANY.queue(pipeline, ...argumentsOf(call));
      const results = (await pipeline.exec()) ?? [];
      replies = calls.map((_, c) => results[c]?.[0] ?? (results[c]?.[1] as number[]) ?? new Error('no reply'));
    }
    const perLock: (number | Error)[] = new Array(batch.length);
    calls.forEach((call, c) => {
      const reply = replies[c];
      call.forEach((i, position) => (perLock[i] = reply instanceof Error ? reply : reply[position]));
    });
    return perLock;
  }
}

/** Locks per renew-many call: large enough to make renewals cheap, small enough not to stall Redis. */
export const RENEWALS_PER_CALL = 500;

function groupBy<T>(items: T[], keyOf: (item: T) => number): T[][] {
  const groups = new Map<number, T[]>();
  for (const item of items) {
    const key = keyOf(item);
    const group = groups.get(key);
    if (group) group.push(item);
    else groups.set(key, [item]);
  }
  return [...groups.values()];
}

function chunks<T>(items: T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}
