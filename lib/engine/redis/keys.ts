/**
 * The Redis keys and channel of one lock. They all carry the same hash tag `{<name>}`, so every
 * script touching them runs on one Cluster slot, and SPUBLISH on the channel stays on that slot.
 * - `lock`: the lock itself, a hash of owner -> hold count (reentrant, fair) or a string token (simple);
 * - `fence`: the fencing-token counter, kept a lease plus `idleKeyTtl` after the last grant or renewal
 *   (lua/include/fencing.lua);
 * - `channel`: unlock notifications (RedLock rounds); a waiting process listens on `<channel>:<client id>`;
 * - `waiting`: reentrant and simple locks' sorted set of waiting client id -> time it registered (one is
 *   woken per release);
 * - `next`: reentrant and simple locks: the client id a free lock is reserved for, for a few ms, after
 *   its holder's process passed it on (see lua/include/hand-over.lua);
 * - `queue`: the fair lock's FIFO queue of waiter ids;
 * - `deadlines`: the fair lock's sorted set of waiter id -> deadline (Redis server time, ms);
 * - `waiterHolds`: the fair lock's hash of waiter id -> the hold id its wait registered, which a hand-over
 *   records the hold under (lua/include/fair-queue.lua); an entry goes with its wait's place in the queue;
 * - `forced`: a hash of recent forceUnlock call ids -> outcome, so a repeat of one changes nothing
 *   (lua/include/force-once.lua); it lives 10 minutes after the latest;
 * - `grants`: the reentrant and fair locks' holds by id, hold id -> its record, living as long as the
 *   lock and a minute after its holds end (lua/include/hold-ids.lua).
 */
export type LockKeys = KeySet<
  'lock' | 'fence' | 'channel' | 'waiting' | 'next' | 'queue' | 'deadlines' | 'waiterHolds' | 'forced' | 'grants'
>;

/**
 * The keys of semaphore `name`: a namespace of their own under the name's hash tag, so a lock and a
 * semaphore of the same name never meet, and every script of one semaphore runs on one Cluster slot.
 * - `holds`: sorted set of holds, '<permits>:<hold id>' -> Redis server time (ms) their lease ends;
 * - `limit`: the limit set at run time (setPermits), absent until then; it lives as long as `fence`;
 * - `fence`: the fencing-token counter, one token per acquisition (see LockKeys);
 * - `channel`: permits came free; a waiting process listens on `<channel>:<client id>`;
 * - `waiting`: sorted set of waiting client id -> time it registered (one is woken when permits come free).
 */
export type SemaphoreKeys = KeySet<'holds' | 'limit' | 'fence' | 'channel' | 'waiting'>;

/**
 * The keys and channels of one read-write lock, under the same hash tag as a lock of that name (one
 * Cluster slot), apart from that lock's own keys.
 * - `write`: the write hold, a hash owner -> hold count, with the write lease;
 * - `readers`: the read holds, a sorted set owner -> expiry of its hold (Redis server time, ms);
 * - `readCounts`: re-entrant read holds, a hash owner -> hold count, living as long as the last read hold;
 * - `writers`: waiting writers' intents, a sorted set `<owner>\0<wait id>` (one per wait) -> deadline (Redis
 *   server time, ms);
 * - `fence`: the fencing-token counter, moved by each write grant (see LockKeys);
 * - `readChannel`: releases that may let readers in; every waiting reader's process listens;
 * - `writeChannel`: releases that may let a writer in; every waiting writer's process listens;
 * - `forced`: recent forceUnlock calls of either side (see LockKeys);
 * - `writeGrants`, `readGrants`: each side's holds by id, hold id -> its record, in the reentrant lock's
 *   format (lua/include/hold-ids.lua). One hash per side, so that a record needs no side of its own and
 *   "a live hold of this owner" means one side's; each lives as long as its side's holds and a minute after.
 */
export type ReadWriteKeys = KeySet<
  | 'write'
  | 'readers'
  | 'readCounts'
  | 'writers'
  | 'fence'
  | 'readChannel'
  | 'writeChannel'
  | 'forced'
  | 'writeGrants'
  | 'readGrants'
>;

type KeySet<K extends string> = { readonly [P in K]: string };

/** Each key of a set from what follows the name's hash tag `<prefix>:{<name>}` in it. */
function keysUnder<K extends string>(prefix: string, name: string, suffixes: KeySet<K>): KeySet<K> {
  const base = `${prefix}:{${encodeName(name)}}`;
  const keys = {} as Record<K, string>;
  for (const key in suffixes) keys[key] = base + suffixes[key];
  return keys;
}

export function lockKeys(prefix: string, name: string): LockKeys {
  return keysUnder(prefix, name, {
    lock: '',
    fence: ':fence',
    channel: ':unlock',
    waiting: ':waiting',
    next: ':next',
    queue: ':queue',
    deadlines: ':deadlines',
    waiterHolds: ':queue:holds',
    forced: ':forced',
    grants: ':grants',
  });
}

export function semaphoreKeys(prefix: string, name: string): SemaphoreKeys {
  const p = ':permits';
  return keysUnder(prefix, name, {
    holds: p,
    limit: `${p}:limit`,
    fence: `${p}:fence`,
    channel: `${p}:free`,
    waiting: `${p}:waiting`,
  });
}

export function readWriteKeys(prefix: string, name: string): ReadWriteKeys {
  return keysUnder(prefix, name, {
    write: ':rw:write',
    readers: ':rw:read',
    readCounts: ':rw:read:counts',
    writers: ':rw:writers',
    fence: ':rw:fence',
    readChannel: ':rw:unlock:read',
    writeChannel: ':rw:unlock:write',
    forced: ':rw:forced',
    writeGrants: ':rw:write:grants',
    readGrants: ':rw:read:grants',
  });
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
