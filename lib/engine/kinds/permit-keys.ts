import { semaphoreKeys, type SemaphoreKeys } from '../redis/keys';

/**
 * A semaphore's keys (see keys.ts), `released`: the holds released lately, hold member -> until when a
 * repeat of its release still replies 'released' (see semaphore-release-7.lua), and `deadlines`: the
 * waiting queue's liveness deadlines (see lua/include/semaphore-queue.lua).
 */
export type PermitKeys = SemaphoreKeys & { readonly released: string; readonly deadlines: string };

export function permitKeys(prefix: string, name: string): PermitKeys {
  const id = `${prefix}\0${name}`;
  let keys = recentKeys.get(id);
  if (!keys) {
    const base = semaphoreKeys(prefix, name);
    keys = Object.freeze({ ...base, released: `${base.holds}:released`, deadlines: `${base.waiting}:deadlines` });
    // A few names are hot: an application that gets its semaphore at every call builds their keys once.
    if (recentKeys.size >= RECENT_KEYS) recentKeys.clear();
    recentKeys.set(id, keys);
  }
  return keys;
}

const RECENT_KEYS = 1_000;
const recentKeys = new Map<string, PermitKeys>();
