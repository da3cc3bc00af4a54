import { monotonicNow } from '../util/clock';
import type { LockRegistry } from './lock-registry';
import type { RedisClient } from '../redis/redis-client';
import { retryWhileUnreachable } from '../redis/retry-while-unreachable';

/**
 * How far back, before a connection drop, releases are sent again: far beyond replication lag and the
 * time a busy process takes to notice the drop.
 */
export const REPLAY_WINDOW_MS = 5_000;

/** At most this many are kept (the newest): a replay is a no-op for all but the last few per lock. */
const MAX_KEPT = 5_000;

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
 * A hot key releases thousands of times a second, so the record is a ring of plain fields: no object
 * per release, and nothing of the released hold kept alive but its holder id (which a record that
 * held the hold itself would carry into the old generation, for the collector to sweep later).
 */
export class RecentReleases {
  private readonly at = new Float64Array(MAX_KEPT);
  private readonly leaseMs = new Float64Array(MAX_KEPT);
  private readonly keys: (string | undefined)[] = new Array(MAX_KEPT).fill(undefined);
  private readonly holders: (string | undefined)[] = new Array(MAX_KEPT).fill(undefined);
  private readonly holdIds: (string | undefined)[] = new Array(MAX_KEPT).fill(undefined);
  private readonly locks: (ReleaseReplayer | undefined)[] = new Array(MAX_KEPT).fill(undefined);
  /** Slot the next release is written to; the oldest kept one when the ring is full. */
  private next = 0;
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
    const slot = this.next;
    this.at[slot] = monotonicNow();
    this.leaseMs[slot] = leaseMs;
    this.keys[slot] = key;
    this.holders[slot] = holder;
    this.holdIds[slot] = holdId;
    this.locks[slot] = lock;
    this.next = (slot + 1) % MAX_KEPT;
    if (this.size < MAX_KEPT) this.size++;
  }

  close(): void {
    this.redis.off('close', this.replay);
    this.redis.off('-node', this.replay);
    this.clear();
  }

  private clear(): void {
    this.keys.fill(undefined);
    this.holders.fill(undefined);
    this.holdIds.fill(undefined);
    this.locks.fill(undefined);
    this.size = 0;
  }

  private readonly replay = (): void => {
    const since = monotonicNow() - REPLAY_WINDOW_MS;
    // One release per hold: a hold is released once.
    type Replay = { key: string; holder: string; holdId: string; leaseMs: number; lock: ReleaseReplayer };
    const recent = new Map<string, Replay>();
    for (let i = 0; i < this.size; i++) {
      const slot = (this.next - this.size + i + MAX_KEPT) % MAX_KEPT; // oldest first
      const key = this.keys[slot];
      const holder = this.holders[slot];
      const holdId = this.holdIds[slot];
      const lock = this.locks[slot];
      if (this.at[slot] < since || key === undefined || holder === undefined || holdId === undefined || !lock) continue;
      recent.set(`${key}\u0000${holdId}`, { key, holder, holdId, leaseMs: this.leaseMs[slot], lock });
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
