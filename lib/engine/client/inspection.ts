import type { LockKeys } from '../redis/keys';
import { ioredisKeyPrefix, type RedisClient } from '../redis/redis-client';
import { INSPECT } from '../scripts/catalog';

/** One owner's holds on a lock. */
export interface LockHolder {
  /** The owner id (reentrant, fair lock) or the token (simple lock). */
  owner: string;
  /** Re-entrant holds; 0 while a fair lock's hand-off to this waiter is not yet accepted. */
  holdCount: number;
  /** Fair lock, handed over and not accepted yet: the wait it is handed to (its waiter id). */
  waiterId?: string;
}

/** One wait of a fair lock, in queue order. */
export interface QueuedWaiter {
  /** This wait's own id, `<client id>:<nonce>`: two waits of one owner are two waiters. */
  waiterId: string;
  /** The owner it waits for. */
  owner: string;
  /** Until its deadline (Redis server time); a waiter that stops refreshing is dropped at 0. */
  expiresInMs: number;
}

/**
 * A snapshot of one lock as Redis holds it, read atomically (one script). What `inspect(name)`
 * returns; the same for every kind, since the kind is not stored with the lock.
 */
export interface LockInspection {
  name: string;
  /** The Redis key of the lock itself. */
  key: string;
  /** `handing-over`: a fair lock handed to the next waiter, not yet accepted. */
  state: 'free' | 'held' | 'handing-over';
  /** `counted`: owner -> hold count (reentrant, fair); `token`: one token (simple lock, RedLock member). */
  holdKind?: 'counted' | 'token';
  holders: LockHolder[];
  /** What is left of the lease; null when free or when the key has no expiry. */
  remainingLeaseMs: number | null;
  /**
   * The fencing counter: the last token handed out or set aside for this name (a process taking turns on
   * a contended lock sets aside a block for its next holds, see ProcessTurns); null if none was ever.
   */
  fencingToken: number | null;
  /** Fair lock: waiters in FIFO order. */
  queue: QueuedWaiter[];
  /** Reentrant and simple locks: client ids of the processes waiting, longest-waiting first. */
  waitingClients: string[];
}

/** Reads the lock under `keys` (see LockInspection). */
export async function inspectLock(redis: RedisClient, name: string, keys: LockKeys): Promise<LockInspection> {
  const [type, pttl, flatHolders, fence, flatQueue, waitingClients] = await INSPECT.run(redis, keys, {});
  const holders: LockHolder[] = [];
  for (let i = 0; i < flatHolders.length; i += 3) {
    const holder: LockHolder = { owner: flatHolders[i], holdCount: Number(flatHolders[i + 1]) };
    if (flatHolders[i + 2]) holder.waiterId = flatHolders[i + 2];
    holders.push(holder);
  }
  const queue: QueuedWaiter[] = [];
  for (let i = 0; i < flatQueue.length; i += 3) {
    const [waiterId, owner, msLeft] = [String(flatQueue[i]), String(flatQueue[i + 1]), Number(flatQueue[i + 2])];
    queue.push({ waiterId, owner, expiresInMs: Math.max(0, msLeft) });
  }
  const held = holders.length > 0;
  return {
    name,
    key: ioredisKeyPrefix(redis) + keys.lock, // as Redis names it: an ioredis keyPrefix comes first
    state: !held ? 'free' : holders.every((h) => h.holdCount === 0) ? 'handing-over' : 'held',
    holdKind: type === 'hash' ? 'counted' : type === 'string' ? 'token' : undefined,
    holders,
    remainingLeaseMs: held && pttl >= 0 ? pttl : null,
    fencingToken: fence ? Number(fence) : null,
    queue,
    waitingClients,
  };
}
