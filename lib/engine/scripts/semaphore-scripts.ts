import { arg, asIs, defineScript, num, str } from './lua-script';
import { publish } from './shared-args';

// The semaphore's scripts (part of the catalog: catalog.ts re-exports them and lists them in ALL_SCRIPTS).

/** An attempt's reply: granted with the token and the permits left, or refused (see semaphore-acquire-7.lua). */
export type PermitAttemptReply =
  | [status: 'granted', token: number, available: number]
  | [status: 'refused', ms: number, available: number, serverMs?: number];

/** How an attempt queues when refused (see semaphore-acquire-7.lua ARGV[7]). */
export type PermitAttemptMode = 'once' | 'wait' | 'queued';

/** Takes `permits` permits for one hold, or queues the acquisition (see semaphore-queue.lua). */
export const SEMAPHORE_ACQUIRE = defineScript({
  file: 'semaphore-acquire-7.lua',
  keys: ['holds', 'limit', 'fence', 'channel', 'waiting', 'deadlines', 'released'],
  args: {
    member: str,
    permits: num,
    leaseMs: num,
    configuredLimit: num,
    publish,
    clientId: str,
    mode: arg<PermitAttemptMode>(),
    idleKeyTtl: num,
    acceptanceLease: num,
    staleWaiterTimeout: num,
  },
  reply: asIs<PermitAttemptReply>,
});

/**
 * Claims a member held already (an attempt whose reply never came, a hand-over its message cannot
 * vouch for), its lease set to `leaseMs` from now, with a token of its own; takes nothing else, so it
 * runs on a full Redis as a renewal does (see semaphore-claim-5.lua).
 */
export const SEMAPHORE_CLAIM = defineScript({
  file: 'semaphore-claim-5.lua',
  keys: ['holds', 'limit', 'fence', 'waiting', 'deadlines'],
  args: { member: str, leaseMs: num, clientId: str, idleKeyTtl: num },
  reply: asIs<[status: 'granted', token: number] | [status: 'refused', ms: -1]>,
});

/**
 * Gives one hold's permits back and hands the permits free to the longest-waiting acquisitions that
 * fit; with `leavingClient`, the ended wait of that client also leaves the queue.
 */
export const SEMAPHORE_RELEASE = defineScript({
  file: 'semaphore-release-7.lua',
  keys: ['holds', 'limit', 'fence', 'channel', 'waiting', 'deadlines', 'released'],
  args: {
    member: str,
    configuredLimit: num,
    publish,
    memoryMs: num,
    acceptanceLease: num,
    idleKeyTtl: num,
    leavingClient: str,
  },
  reply: asIs<'released' | 'not-locked'>,
});

/** Permits free under the new limit (negative: held beyond it after a shrink). */
export const SEMAPHORE_SET_PERMITS = defineScript({
  file: 'semaphore-set-permits-6.lua',
  keys: ['holds', 'limit', 'fence', 'channel', 'waiting', 'deadlines'],
  args: { permits: num, publish, idleKeyTtl: num, acceptanceLease: num },
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
