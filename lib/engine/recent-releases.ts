import type { LockRegistry } from './lock-registry';
import type { RedisClient } from './redis-client';
import { retryWhileUnreachable } from './retry-while-unreachable';

/** How far back, before a connection drop, releases are sent again: far beyond any replication lag. */
export const REPLAY_WINDOW_MS = 1_000;

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
 * for the rest of its lease. So the releases of the last second are kept, and when the connection
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
    while (this.entries.length > 0 && this.entries[0].at < now - REPLAY_WINDOW_MS) this.entries.shift();
    this.entries.push({ at: now, key, holder, leaseMs, replay });
  }

  close(): void {
    this.redis.off('close', this.replay);
    this.redis.off('-node', this.replay);
    this.entries = [];
  }

  private readonly replay = (): void => {
    const since = Date.now() - REPLAY_WINDOW_MS;
    const recent = this.entries.filter((e) => e.at >= since);
    this.entries = [];
    const { redis, operationTimeout, registry } = this;
    for (const entry of recent) {
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
