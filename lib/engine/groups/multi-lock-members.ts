import { deploymentIdentity } from '../redis/deployment-identity';
import { LockOptionsError } from '../errors';
import type { LockBase } from '../lock/lock-base';
import { ioredisKeyPrefix } from '../redis/redis-client';

/** What places one lock in the order every process takes a MultiLock's locks in. */
interface Placed {
  lock: LockBase;
  /** Its key as Redis stores it (after the ioredis keyPrefix). */
  key: string;
  /** Its name's fencing counter as Redis stores it: the kinds of one name that exclude each other share it. */
  fence: string;
  /** See deploymentIdentity. */
  deployment: string;
}

/** A MultiLock's locks, each taken once, in the order every process takes them. */
export interface MultiLockMembers {
  /** The distinct locks, by key, then by deployment. */
  readonly ordered: readonly LockBase[];
  /** For each lock as given, the member taken for it (itself, or an equal lock given earlier). */
  readonly memberFor: readonly LockBase[];
}

/**
 * Orders a MultiLock's locks by key, then by deployment, so that every process takes the same key on
 * two servers in the same order (the order the caller gave them is not shared). A lock given twice
 * (same deployment, key and kind, through any client) is taken once, by the first given.
 * @throws LockOptionsError when one name is given with two kinds on one deployment (e.g. a reentrant
 * and a fair lock, or a read and a write lock): they exclude each other, so the group would wait for itself
 */
export function multiLockMembers(locks: readonly LockBase[]): MultiLockMembers {
  const byName = new Map<string, Placed>(); // deployment and fencing counter -> the first lock given there
  const memberFor = locks.map((lock) => {
    const placed = place(lock);
    const name = `${placed.deployment}\n${placed.fence}`;
    const first = byName.get(name);
    if (!first) {
      byName.set(name, placed);
      return lock;
    }
    if (first.lock.kind !== lock.kind) {
      throw new LockOptionsError(
        `MultiLock was given "${lock.name}" as a ${first.lock.kind} and as a ${lock.kind} lock on one Redis ` +
          'deployment: they exclude each other, so the MultiLock would wait for itself. Give the name once.',
        lock.name,
      );
    }
    return first.lock;
  });
  const members = [...byName.values()];
  members.sort((a, b) => compareText(a.key, b.key) || compareText(a.deployment, b.deployment));
  return { ordered: members.map((m) => m.lock), memberFor };
}

function place(lock: LockBase): Placed {
  const { redis } = lock;
  const prefix = ioredisKeyPrefix(redis);
  return { lock, key: prefix + lock.keys.lock, fence: prefix + lock.keys.fence, deployment: deploymentIdentity(redis) };
}

/** By UTF-16 code units: the same in every process, whatever its locale. */
function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
