import type { LockRegistry } from './lock-registry';
import type { RedisClient } from './redis-client';
import { retryWhileUnreachable } from './retry-while-unreachable';

/**
 * How far back, before a connection drop, releases are sent again: far beyond replication lag and the
 * time a busy process takes to notice the drop.
 */
export const REPLAY_WINDOW_MS = 5_000;

/** At most this many are kept (the newest): a replay is a no-op for all but the last few per lock. */
const MAX_KEPT = 5_000;

interface RecentRelease {
  at: number;
  key: string;
  holder: string;
  /** Sends the release again (idempotent: it only ever removes this holder's own hold). */
  replay: () => Promise<unknown>;
  /** How long the hold could still live, bounding the retries. */
  leaseMs: number;
}

/**
 * Replication is asynchronous: a release the old master acknowledged just before it died may never
 * have reached the replica a failover promotes, and the lock would come back there, held by nobody,
 * for the rest of its lease. So the releases of the last few seconds are kept, and when the connection
 * drops they are sent again once it is back (to the new master). A holder that took the lock again
 * meanwhile is left alone.
 */
export class RecentReleases {
  private entries: RecentRelease[] = [];

  constructor(
    private readonly redis: RedisClient,
    private readonly registry: LockRegistry,
    private readonly operationTimeout: number,
  ) {
    // 'close': a standalone or sentinel connection dropped; '-node': a Cluster lost a node.
    redis.on('close', this.replay);
    redis.on('-node', this.replay);
  }

  note(key: string, holder: string, leaseMs: number, replay: () => Promise<unknown>): void {
    const now = Date.now();
    while (
      this.entries.length > 0 &&
      (this.entries[0].at < now - REPLAY_WINDOW_MS || this.entries.length >= MAX_KEPT)
    ) {
      this.entries.shift();
    }
    this.entries.push({ at: now, key, holder, leaseMs, replay });
  }

  close(): void {
    this.redis.off('close', this.replay);
    this.redis.off('-node', this.replay);
    this.entries = [];
  }

  private readonly replay = (): void => {
    const since = Date.now() - REPLAY_WINDOW_MS;
    // The newest release per holder and lock is enough: older ones of the same hold are no-ops.
    const recent = new Map<string, RecentRelease>();
    for (const e of this.entries) if (e.at >= since) recent.set(`${e.key}\u0000${e.holder}`, e);
    this.entries = [];
    const { redis, operationTimeout, registry } = this;
    for (const entry of recent.values()) {
      if (registry.get(entry.key, entry.holder)) continue; // holds it again: that hold is not ours to touch
      const until = Date.now() + entry.leaseMs + operationTimeout;
      const sent = retryWhileUnreachable(entry.replay, { redis, operationTimeout, until, name: 'replay release' });
      registry.inFlightFor(
        entry.key,
        entry.holder,
        sent.catch(() => undefined),
      );
    }
  };
}
