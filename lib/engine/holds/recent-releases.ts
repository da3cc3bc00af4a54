import { monotonicNow } from '../util/clock';
import type { LockRegistry } from './lock-registry';
import type { RedisClient } from '../redis/redis-client';
import { retryWhileUnreachable } from '../redis/retry-while-unreachable';

/**
 * How far back, before a connection drop, releases are sent again: far beyond replication lag and the
 * time a busy process takes to notice the drop.
 */
export const REPLAY_WINDOW_MS = 5_000;

/** At most about this many are kept (the newest): a replay is a no-op for all but the last few per lock. */
const MAX_KEPT = 5_000;

/** The span of one bucket of releases (see RecentReleases). */
const BUCKET_MS = 100;

/** Fields per release in a bucket. */
const FIELDS = 5;

/** The releases noted within BUCKET_MS from `at`: (lock, key, holder, holdId, leaseMs) each, from `start` on. */
interface Bucket {
  readonly at: number;
  readonly entries: unknown[];
  /** Entries before it went (see dropOldest). */
  start: number;
}

/** The lock that made a release, which can send it again (idempotent: it only removes that hold). */
export interface ReleaseReplayer {
  replayRelease(holder: string, holdId: string, leaseMs: number): Promise<unknown>;
}

/**
 * Replication is asynchronous: a release the old master acknowledged just before it died may never
 * have reached the replica a failover promotes, and the lock would come back there, held by nobody,
 * for the rest of its lease. So the releases of the last few seconds are kept, and when the connection
 * drops they are sent again once it is back (to the new master). Each names the hold it ended (its id,
 * or a simple lock's or semaphore's token), so a holder that took the lock since, with any owner, from
 * any process, is left alone.
 *
 * A hot key releases thousands of times a second, so the record is plain fields in arrays: no object
 * per release, and nothing of the released hold kept alive but its holder id (which a record that
 * held the hold itself would carry into the old generation, for the collector to sweep later). The
 * arrays are young buckets, not one long-lived ring: a ring in the old generation gets a pointer to a
 * young string at every release, which every scavenge must visit (in a side trial, a loop on one key
 * with Redis's replies canned: 2.1 µs of client CPU per acquire + release for the ring, 1.1 for buckets).
 */
export class RecentReleases {
  /** The releases kept, oldest first; a bucket past the window goes whole. */
  private buckets: Bucket[] = [];
  private size = 0;

  constructor(
    private readonly redis: RedisClient,
    private readonly registry: LockRegistry,
    private readonly operationTimeout: number,
  ) {
    // 'close': a standalone or sentinel connection dropped; '-node': a Cluster lost a node.
    redis.on('close', this.replay);
    redis.on('-node', this.replay);
  }

  /** `lock` released `holder`'s hold `holdId` on `key` (its lease `leaseMs`). */
  note(lock: ReleaseReplayer, key: string, holder: string, holdId: string, leaseMs: number): void {
    const now = monotonicNow();
    let last = this.buckets[this.buckets.length - 1];
    if (last === undefined || now - last.at >= BUCKET_MS) {
      this.dropOld(now);
      last = { at: now, entries: [], start: 0 };
      this.buckets.push(last);
    }
    last.entries.push(lock, key, holder, holdId, leaseMs);
    if (++this.size > MAX_KEPT) this.dropOldest();
  }

  /** Buckets whose newest release is past the replay window go. */
  private dropOld(now: number): void {
    let drop = 0;
    while (drop < this.buckets.length && now - this.buckets[drop].at > REPLAY_WINDOW_MS + BUCKET_MS) {
      const { entries, start } = this.buckets[drop];
      this.size -= (entries.length - start) / FIELDS;
      drop++;
    }
    if (drop > 0) this.buckets.splice(0, drop);
  }

  /** Past MAX_KEPT: the oldest release goes (a replay is a no-op for all but the last few per lock). */
  private dropOldest(): void {
    const oldest = this.buckets[0];
    oldest.entries.fill(undefined, oldest.start, oldest.start + FIELDS);
    oldest.start += FIELDS;
    this.size--;
    if (oldest.start === oldest.entries.length) this.buckets.shift();
  }

  close(): void {
    this.redis.off('close', this.replay);
    this.redis.off('-node', this.replay);
    this.clear();
  }

  private clear(): void {
    this.buckets = [];
    this.size = 0;
  }

  private readonly replay = (): void => {
    const since = monotonicNow() - REPLAY_WINDOW_MS;
    // One release per hold: a hold is released once.
    type Replay = { key: string; holder: string; holdId: string; leaseMs: number; lock: ReleaseReplayer };
    const recent = new Map<string, Replay>();
    for (const bucket of this.buckets) {
      const { entries, start } = bucket;
      if (bucket.at + BUCKET_MS < since) continue;
      for (let i = start; i < entries.length; i += FIELDS) {
        const lock = entries[i] as ReleaseReplayer;
        const key = entries[i + 1] as string;
        const holder = entries[i + 2] as string;
        const holdId = entries[i + 3] as string;
        recent.set(`${key}\u0000${holdId}`, { key, holder, holdId, leaseMs: entries[i + 4] as number, lock });
      }
    }
    this.clear();
    const { redis, operationTimeout, registry } = this;
    for (const { key, holder, holdId, leaseMs, lock } of recent.values()) {
      const until = monotonicNow() + leaseMs + operationTimeout;
      const sent = retryWhileUnreachable(() => lock.replayRelease(holder, holdId, leaseMs), {
        redis,
        operationTimeout,
        until,
        name: 'replay release',
      });
      registry.inFlightFor(
        key,
        holder,
        sent.catch(() => undefined),
      );
    }
  };
}
