import type { ChainableCommander } from 'ioredis';
import { bounded } from './bounded';
import type { LockLostReason } from './errors';
import type { HeldLock } from './held-lock';
import type { LockLogger } from './logger';
import type { RedisClient } from './redis-client';
import { queueScript, registerScripts, runScript } from './scripts';

/**
 * One ticker per client renews every watched lock, every `watchdogTimeout / 3`, in one pipeline (one
 * round trip however many locks are held). Its timer never keeps the process alive and runs only
 * while something is watched.
 */
export class Watchdog {
  private readonly watched = new Set<HeldLock>();
  private timer?: NodeJS.Timeout;
  private ticking = false;

  constructor(
    private readonly client: RedisClient,
    private readonly intervalMs: number,
    private readonly operationTimeout: number,
    private readonly onLost: (lock: HeldLock, reason: LockLostReason) => void,
    private readonly logger: LockLogger,
  ) {}

  get size(): number {
    return this.watched.size;
  }

  watch(lock: HeldLock): void {
    this.watched.add(lock);
    if (!this.timer) {
      this.timer = setInterval(() => void this.tick(), this.intervalMs);
      this.timer.unref();
    }
  }

  unwatch(lock: HeldLock): void {
    this.watched.delete(lock);
    if (this.watched.size === 0) this.stop();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  close(): void {
    this.watched.clear();
    this.stop();
  }

  /** Renews everything watched now. Exposed for tests and for `extend()`-like callers. */
  async tick(): Promise<void> {
    if (this.ticking || this.watched.size === 0) return;
    this.ticking = true;
    const batch = [...this.watched];
    const sentAt = Date.now();
    try {
      const results = await bounded(this.renewAll(batch), this.operationTimeout, { name: 'watchdog renewal' });
      batch.forEach((lock, i) => this.apply(lock, results[i], sentAt));
    } catch (error) {
      this.logger.warn(`Lock renewal failed for ${batch.length} lock(s): ${(error as Error).message}`);
      batch.forEach((lock) => this.apply(lock, error as Error, sentAt));
    } finally {
      this.ticking = false;
    }
  }

  private apply(lock: HeldLock, result: number | Error | undefined, sentAt: number): void {
    if (!this.watched.has(lock)) return; // released (or re-acquired) while the renewal was in flight
    if (result === 1) {
      lock.expiresAt = sentAt + lock.leaseMs;
    } else if (result === 0) {
      this.onLost(lock, 'not-owner');
    } else if (Date.now() >= lock.expiresAt) {
      this.onLost(lock, 'unreachable');
    }
  }

  /** One pipeline on a standalone client; on a Cluster one command per lock (ioredis groups them per node). */
  private async renewAll(batch: HeldLock[]): Promise<(number | Error)[]> {
    registerScripts(this.client);
    if (this.client.isCluster) {
      return Promise.all(
        batch.map((lock) =>
          runScript<number>(this.client, lock.renewal.script, lock.renewal.keys, lock.renewal.args).catch(
            (error: Error) => error,
          ),
        ),
      );
    }
    const pipeline: ChainableCommander = this.client.pipeline();
    for (const lock of batch) queueScript(pipeline, lock.renewal.script, lock.renewal.keys, lock.renewal.args);
    const replies = (await pipeline.exec()) ?? [];
    return replies.map(([error, value]) => error ?? (value as number));
  }
}
