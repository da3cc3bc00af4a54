import type Redis from 'ioredis';
import { lockKeys, readWriteKeys, semaphoreKeys } from '../../lib/internal';
import type { SingleKind } from './steps';
import { OPERATION_TIMEOUT_MS, WATCHDOG_MS } from './world';

/**
 * The model's invariants, checked after every step against Redis itself (one MULTI of plain reads on
 * a plain connection to the server, so one instant of Redis's state):
 *
 * - exclusion: Redis never shows more holders than the kind allows: one owner of a reentrant, fair or
 *   write lock (a fair lock's hand-off, a count of 0, counts as one); no live reader beside a writer
 *   but the writer itself; the live permits of a semaphore within its limit. No tolerance.
 * - belief (at least): every handle whose signal has not aborted (and that the model did not release)
 *   is in Redis under its id (`handle.owner`) with at least the holds its clients believe: the sum of
 *   `holdCount` over the clients holding that id (an explicit owner shared across clients is one hold
 *   whose count adds up), less the holds `unlock({ owner })` released from a client that held none
 *   locally. No tolerance, unless Redis may rightly have dropped it: a forceUnlock of that lock since
 *   the hold was last seen, its lease ended (the last PTTL seen, or the acquisition's lease), such an
 *   unlock, or an acquisition of that lock still under way. Then the handle must abort within
 *   ABORT_WITHIN_MS (an explicit lease: by its end) or it is a stale believer.
 * - belief (library): each client's `holdCount` for an id equals the live handles the model has of it.
 * - belief (exact) and no orphan: a hold (or hold count) in Redis beyond what live handles believe
 *   disappears within EXCESS_WITHIN_MS: a lease plus a retried release or undo. One that lasts longer
 *   is being renewed with no believer, or counted twice.
 */

/** Longest a handle may go on believing a hold Redis rightly dropped: a renewal, a bounded call, a lent hold's second, slack. */
export const ABORT_WITHIN_MS = Math.ceil(WATCHDOG_MS / 3) + OPERATION_TIMEOUT_MS + 1_000 + 1_500;
/** Longest a hold may stay in Redis with no believer: a lease, a release retried through an outage, slack. */
export const EXCESS_WITHIN_MS = WATCHDOG_MS + OPERATION_TIMEOUT_MS + 2_500;
/** The semaphore's limit in every client. */
export const SEMAPHORE_PERMITS = 3;

/** One lock (one side of a read-write lock) as Redis held it at `serverNow`. */
export interface LockSnapshot {
  /** Hold id -> hold count (a fair hand-off not yet accepted: 0; a simple lock's token, a permit: 1). */
  holds: Map<string, number>;
  /** Hold id -> when its lease ends (server ms). */
  expiresAt: Map<string, number>;
  /** Semaphore: hold id -> permits. */
  permits: Map<string, number>;
  /** Semaphore: the limit stored by setPermits, if any. */
  storedLimit?: number;
}

export interface Snapshot {
  /** Redis TIME, in ms. */
  serverNow: number;
  /** By model lock key (see lockKey). */
  locks: Map<string, LockSnapshot>;
}

export interface SnapshotTarget {
  kind: SingleKind;
  name: string;
}

export const lockKey = (kind: SingleKind, name: string) => `${kind}:${name}`;

/** Reads every target lock in one MULTI (atomic: one instant of Redis's state). */
export async function readSnapshot(admin: Redis, prefix: string, targets: SnapshotTarget[]): Promise<Snapshot> {
  const multi = admin.multi().time();
  for (const { kind, name } of targets) {
    if (kind === 'reentrant' || kind === 'fair') {
      const key = lockKeys(prefix, name).lock;
      multi.hgetall(key).pttl(key);
    } else if (kind === 'simple') {
      const key = lockKeys(prefix, name).lock;
      multi.get(key).pttl(key);
    } else if (kind === 'write') {
      const key = readWriteKeys(prefix, name).write;
      multi.hgetall(key).pttl(key);
    } else if (kind === 'read') {
      const rw = readWriteKeys(prefix, name);
      multi.zrange(rw.readers, 0, -1, 'WITHSCORES').hgetall(rw.readCounts);
    } else {
      const keys = semaphoreKeys(prefix, name);
      multi.zrange(keys.holds, 0, -1, 'WITHSCORES').get(keys.limit);
    }
  }
  // Every reply of a plain read: a WRONGTYPE error would be a finding too, so it is thrown.
  const replies = (await multi.exec())!.map(([error, value]) => {
    if (error) throw error;
    return value;
  });
  const [seconds, micros] = replies.shift() as [string, string];
  const serverNow = Number(seconds) * 1_000 + Math.floor(Number(micros) / 1_000);
  const locks = new Map<string, LockSnapshot>();
  for (const { kind, name } of targets) {
    const lock: LockSnapshot = { holds: new Map(), expiresAt: new Map(), permits: new Map() };
    locks.set(lockKey(kind, name), lock);
    if (kind === 'reentrant' || kind === 'fair' || kind === 'simple' || kind === 'write') {
      const value = replies.shift() as Record<string, string> | string | null;
      const pttl = replies.shift() as number;
      const expiresAt = pttl >= 0 ? serverNow + pttl : Infinity;
      if (typeof value === 'string') lock.holds.set(value, 1);
      else if (value) {
        // A field starting with NUL is the engine's own bookkeeping: an owner id never has a NUL.
        for (const [id, count] of Object.entries(value)) if (!id.startsWith('\0')) lock.holds.set(id, Number(count));
      }
      for (const id of lock.holds.keys()) lock.expiresAt.set(id, expiresAt);
    } else if (kind === 'read') {
      const readers = replies.shift() as string[];
      const counts = replies.shift() as Record<string, string>;
      for (let i = 0; i < readers.length; i += 2) {
        const expiry = Number(readers[i + 1]);
        if (expiry <= serverNow) continue; // ran out: no longer a hold, whatever the scripts reclaim later
        lock.holds.set(readers[i], Number(counts[readers[i]] ?? 1));
        lock.expiresAt.set(readers[i], expiry);
      }
    } else {
      const holds = replies.shift() as string[];
      const limit = replies.shift() as string | null;
      if (limit !== null) lock.storedLimit = Number(limit);
      for (let i = 0; i < holds.length; i += 2) {
        const expiry = Number(holds[i + 1]);
        if (expiry <= serverNow) continue;
        lock.holds.set(holds[i], 1);
        lock.expiresAt.set(holds[i], expiry);
        lock.permits.set(holds[i], Number(holds[i].split(':', 1)[0]));
      }
    }
  }
  return { serverNow, locks };
}

/** A broken invariant, as the report prints it. */
export interface Violation {
  invariant: string;
  lock: string;
  detail: string;
}

/** The holds of one model lock's name-family that exclusion is judged on (a read-write lock's two sides together). */
export function exclusionViolations(
  kind: SingleKind,
  name: string,
  snap: LockSnapshot,
  writeSide?: LockSnapshot,
): Violation[] {
  const lock = lockKey(kind, name);
  const show = () => JSON.stringify([...snap.holds]);
  if (kind === 'reentrant' || kind === 'fair' || kind === 'write') {
    if (snap.holds.size > 1) {
      return [{ invariant: 'exclusion', lock, detail: `${snap.holds.size} owners hold it at once: ${show()}` }];
    }
  } else if (kind === 'read' && writeSide) {
    const writers = [...writeSide.holds].filter(([, count]) => count > 0).map(([id]) => id);
    const others = [...snap.holds.keys()].filter((id) => !writers.includes(id));
    if (writers.length > 0 && others.length > 0) {
      return [
        {
          invariant: 'exclusion',
          lock,
          detail: `writer ${JSON.stringify(writers)} beside readers ${JSON.stringify(others)}`,
        },
      ];
    }
  } else if (kind === 'semaphore') {
    const limit = snap.storedLimit ?? SEMAPHORE_PERMITS;
    const used = [...snap.permits.values()].reduce((a, b) => a + b, 0);
    if (used > limit) {
      return [{ invariant: 'exclusion', lock, detail: `${used} permits held, limit ${limit}: ${show()}` }];
    }
  }
  return [];
}
