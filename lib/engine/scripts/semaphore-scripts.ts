import { arg, asIs, defineScript, num, str, yesNo } from './lua-script';
import type { AttemptStatus } from './replies';
import { publish, waiting } from './shared-args';

// The semaphore's scripts (part of the catalog: catalog.ts re-exports them and lists them in ALL_SCRIPTS).

/** An attempt's reply and the permits free after it. */
export type PermitAttemptReply = [status: Exclude<AttemptStatus, 'reentered'>, value: number, available: number];

/** Takes `permits` permits for one hold, or registers the waiting group (see semaphore-waiting.lua). */
export const SEMAPHORE_ACQUIRE = defineScript({
  file: 'semaphore-acquire-5.lua',
  keys: ['holds', 'limit', 'fence', 'channel', 'waiting'],
  args: {
    member: str,
    permits: num,
    leaseMs: num,
    configuredLimit: num,
    publish,
    chained: arg<'1' | '0'>(),
    clientId: str,
    waiting,
    idleKeyTtl: num,
  },
  reply: asIs<PermitAttemptReply>,
});

/** Gives one hold's permits back and wakes a waiting group that can take the permits free. */
export const SEMAPHORE_RELEASE = defineScript({
  file: 'semaphore-release-5.lua',
  keys: ['holds', 'limit', 'channel', 'waiting', 'released'],
  args: { member: str, configuredLimit: num, publish, memoryMs: num },
  reply: asIs<'released' | 'not-locked'>,
});

/** Permits free under the new limit (negative: held beyond it after a shrink). */
export const SEMAPHORE_SET_PERMITS = defineScript({
  file: 'semaphore-set-permits-4.lua',
  keys: ['holds', 'limit', 'channel', 'waiting'],
  args: { permits: num, publish, idleKeyTtl: num },
  reply: asIs<number>,
});

/** [limit, permits held by live holds]. */
export const SEMAPHORE_STATE = defineScript({
  file: 'semaphore-state-2.lua',
  keys: ['holds', 'limit'],
  args: { configuredLimit: num },
  reply: asIs<[limit: number, held: number]>,
});

/**
 * [run-time limit, permits held, flat (member, ms left) pairs, live holds in all, fence, waiting client
 * ids, waiting in all]: see semaphore-inspect-4.lua.
 */
export type SemaphoreInspectReply = [
  string | null,
  number,
  (string | number)[],
  number,
  string | null,
  string[],
  number,
];

/** A semaphore's holds, limit, fence and waiting processes, read-only, each list cut at `most`. */
export const SEMAPHORE_INSPECT = defineScript({
  file: 'semaphore-inspect-4.lua',
  keys: ['holds', 'limit', 'fence', 'waiting'],
  args: { most: num },
  reply: asIs<SemaphoreInspectReply>,
});

/** Yes: another waiting group was woken. */
export const SEMAPHORE_PASS = defineScript({
  file: 'semaphore-pass-4.lua',
  keys: ['holds', 'limit', 'channel', 'waiting'],
  args: { clientId: str, permits: num, configuredLimit: num, publish },
  reply: yesNo,
});
