/**
 * The Redis keys and channel of one lock. They all carry the same hash tag `{<name>}`, so every
 * script touching them runs on one Cluster slot, and SPUBLISH on the channel stays on that slot.
 */
export interface LockKeys {
  /** The lock itself: a hash of owner -> hold count (reentrant, fair) or a string token (simple). */
  readonly lock: string;
  /** Fencing-token counter. */
  readonly fence: string;
  /** Unlock notifications (RedLock rounds); a waiting process listens on `<channel>:<client id>`. */
  readonly channel: string;
  /** Reentrant and simple locks: sorted set of waiting client id -> time it registered (one is woken per release). */
  readonly waiting: string;
  /**
   * Reentrant and simple locks: the client id a free lock is reserved for, for a few ms, after its
   * holder's process passed it on (see lua/include/hand-over.lua).
   */
  readonly next: string;
  /** Fair lock: FIFO queue of waiter ids. */
  readonly queue: string;
  /** Fair lock: sorted set of waiter id -> deadline (Redis server time, ms). */
  readonly deadlines: string;
}

/**
 * Braces would move the hash tag, so they are percent-encoded (and "%" itself, to keep the encoding
 * reversible and distinct names distinct).
 */
export function encodeName(name: string): string {
  return name.replace(/[%{}]/g, (c) => '%' + c.charCodeAt(0).toString(16).toUpperCase());
}

/** The inverse of encodeName. */
export function decodeName(encoded: string): string {
  return encoded.replace(/%([0-9A-F]{2})/g, (_match, hex: string) => String.fromCharCode(parseInt(hex, 16)));
}

export function lockKeys(prefix: string, name: string): LockKeys {
  const base = `${prefix}:{${encodeName(name)}}`;
  return {
    lock: base,
    fence: `${base}:fence`,
    channel: `${base}:unlock`,
    waiting: `${base}:waiting`,
    next: `${base}:next`,
    queue: `${base}:queue`,
    deadlines: `${base}:deadlines`,
  };
}

/**
 * The keys of semaphore `name`: a namespace of their own under the name's hash tag, so a lock and a
 * semaphore of the same name never meet, and every script of one semaphore runs on one Cluster slot.
 */
export interface SemaphoreKeys {
  /** Sorted set of holds: '<permits>:<hold id>' -> Redis server time (ms) their lease ends. */
  readonly holds: string;
  /** The limit set at run time (setPermits); absent until then. Never expires. */
  readonly limit: string;
  /** Fencing-token counter: one token per acquisition. */
  readonly fence: string;
  /** Permits came free: a waiting process listens on `<channel>:<client id>`. */
  readonly channel: string;
  /** Sorted set of waiting client id -> time it registered (one is woken when permits come free). */
  readonly waiting: string;
}

export function semaphoreKeys(prefix: string, name: string): SemaphoreKeys {
  const holds = `${prefix}:{${encodeName(name)}}:permits`;
  return {
    holds,
    limit: `${holds}:limit`,
    fence: `${holds}:fence`,
    channel: `${holds}:free`,
    waiting: `${holds}:waiting`,
  };
}

/**
 * The keys and channels of one read-write lock, under the same hash tag as a lock of that name (one
 * Cluster slot), apart from that lock's own keys.
 */
export interface ReadWriteKeys {
  /** The write hold: hash owner -> hold count, with the write lease. */
  readonly write: string;
  /** The read holds: sorted set owner -> expiry of its hold (Redis server time, ms). */
  readonly readers: string;
  /** Re-entrant read holds: hash owner -> hold count, living as long as the last read hold. */
  readonly readCounts: string;
  /** Waiting writers' intents: sorted set owner -> deadline (Redis server time, ms). */
  readonly writers: string;
  /** Fencing-token counter, incremented by each write grant. */
  readonly fence: string;
  /** Releases that may let readers in are published here; every waiting reader's process listens. */
  readonly readChannel: string;
  /** Releases that may let a writer in are published here; every waiting writer's process listens. */
  readonly writeChannel: string;
}

export function readWriteKeys(prefix: string, name: string): ReadWriteKeys {
  const base = `${prefix}:{${encodeName(name)}}:rw`;
  return {
    write: `${base}:write`,
    readers: `${base}:read`,
    readCounts: `${base}:read:counts`,
    writers: `${base}:writers`,
    fence: `${base}:fence`,
    readChannel: `${base}:unlock:read`,
    writeChannel: `${base}:unlock:write`,
  };
}
