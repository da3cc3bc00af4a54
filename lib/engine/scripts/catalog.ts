import type { HandOver } from '../turns/process-turns';
import { arg, asIs, defineScript, num, str, yesNo } from './lua-script';
import { VariableKeysScript } from './variable-keys-script';
import { publish, waiting } from './shared-args';
import {
  SEMAPHORE_ACQUIRE,
  SEMAPHORE_CLAIM,
  SEMAPHORE_INSPECT,
  SEMAPHORE_RELEASE,
  SEMAPHORE_SET_PERMITS,
  SEMAPHORE_STATE,
} from './semaphore-scripts';
import type {
  AttemptReply,
  ClaimReply,
  FairAttemptReply,
  ReleaseReply,
  TurnAttemptReply,
  WriteAttemptReply,
} from './replies';

/**
 * Every Lua script of lua/, declared once: the keys it takes (named as keys.ts names them), its
 * arguments in order with their types, and its reply (words from replies.ts). Each file's header
 * says what the keys and arguments mean; test/engine/script-contracts.spec.ts checks each
 * declaration against its file and runs every script. The semaphore's are in semaphore-scripts.ts,
 * re-exported here.
 */

export type { WaitingFlag } from './shared-args';
export * from './semaphore-scripts';

// The reentrant and simple locks: the lock with its process-waiting registry and hand-over.

const RELEASE_KEYS = ['lock', 'channel', 'waiting', 'next'] as const;
const handOver = arg<HandOver>();

/**
 * LOCK takes or re-enters the lock under the attempt's own hold id, or registers the waiting process;
 * UNLOCK releases the hold it names (`which` 'one'), or any one hold of the owner under the call's own
 * id (`which` 'any'), the last one waking one waiting process, or inside a turn (`handOver` 'keep')
 * reserving the lock for the rest of the turn (`turnMs`) and telling the next process when it ends.
 * See hold-ids.lua and hand-over.lua.
 */
export const LOCK = defineScript({
  file: 'lock-5.lua',
  keys: ['lock', 'fence', 'waiting', 'next', 'grants'],
  args: { leaseMs: num, owner: str, clientId: str, waiting, holdId: str, idleKeyTtl: num },
  reply: asIs<TurnAttemptReply>,
});

export const UNLOCK = defineScript({
  file: 'unlock-6.lua',
  keys: [...RELEASE_KEYS, 'grants', 'fence'],
  args: {
    owner: str,
    holdId: str,
    leaseMs: num,
    publish,
    message: str,
    handOver,
    clientId: str,
    which: arg<'one' | 'any'>(),
    turnMs: num,
  },
  reply: asIs<ReleaseReply>,
});

/** The hold of an attempt whose reply never came, claimed if it landed, else cancelled for good. */
export const CLAIM_ATTEMPT = defineScript({
  file: 'claim-attempt-3.lua',
  keys: ['lock', 'grants', 'fence'],
  args: { holdId: str, owner: str, leaseMs: num, idleKeyTtl: num },
  reply: asIs<ClaimReply>,
});

/** `SET NX PX` under the attempt's token, with the waiting registry and hand-over of LOCK. */
export const SIMPLE_LOCK = defineScript({
  file: 'simple-lock-5.lua',
  keys: ['lock', 'fence', 'waiting', 'next', 'released'],
  args: { token: str, leaseMs: num, clientId: str, waiting, idleKeyTtl: num },
  reply: asIs<TurnAttemptReply>,
});

/**
 * Compare-and-delete of the hold a `token` names, or (`token` '') of `owner`'s hold under the call's
 * own `callId`, with the hand-over of UNLOCK; a repeat of a release that landed replies 'released'.
 */
export const SIMPLE_UNLOCK = defineScript({
  file: 'simple-unlock-5.lua',
  keys: [...RELEASE_KEYS, 'released'],
  args: { token: str, owner: str, callId: str, publish, message: str, handOver, clientId: str, turnMs: num },
  reply: asIs<ReleaseReply>,
});

/** Claims an unanswered attempt's hold (the lock holds its `token`), or cancels the token for good. */
export const SIMPLE_CLAIM = defineScript({
  file: 'simple-claim-3.lua',
  keys: ['lock', 'fence', 'released'],
  args: { token: str },
  reply: asIs<ClaimReply>,
});

// RedLock: each master's vote, with the simple lock's waiting registry (not its hand-over).

/**
 * How a RedLock vote may register its process as waiting: as waiting, with other waiters ('1') or not
 * ('0'; '-' while its wait was never refused, so its process is not registered), or never ('once').
 */
export type VoteWaiting = '0' | '1' | '-' | 'once';

/**
 * `SET NX PX` under the attempt's `token` and the next fencing token; refused, a waiting caller's
 * process joins the waiting registry. A repeat of a grant that landed changes nothing.
 */
export const REDLOCK_GRANT = defineScript({
  file: 'redlock-grant-3.lua',
  keys: ['lock', 'fence', 'waiting'],
  args: { token: str, leaseMs: num, idleKeyTtl: num, clientId: str, waiting: arg<VoteWaiting>() },
  reply: asIs<AttemptReply>,
});

/**
 * Compare-and-delete of the hold `token` names, announced to the longest-waiting process (or on the
 * unlock channel when none listens) unless `message` is '', with how many processes other than
 * `clientId`'s heard it; a repeat changes nothing.
 */
export const REDLOCK_RELEASE = defineScript({
  file: 'redlock-release-3.lua',
  keys: ['lock', 'channel', 'waiting'],
  args: { token: str, publish, message: str, clientId: str },
  reply: asIs<[status: 'released', listeners: number] | 'not-owner' | 'not-locked'>,
});

/** Yes: this process left the waiting registry and, the lock being free, woke the next one. */
export const PASS_WAKE = defineScript({
  file: 'pass-wake-4.lua',
  keys: RELEASE_KEYS,
  args: { clientId: str, publish, message: str },
  reply: yesNo,
});

/** Yes: it was locked (deleted, and a waiting process woken). A repeat of one `callId` changes nothing. */
export const FORCE_UNLOCK = defineScript({
  file: 'force-unlock-6.lua',
  keys: [...RELEASE_KEYS, 'forced', 'grants'],
  args: { publish, message: str, callId: str },
  reply: yesNo,
});

// Fair lock.

/**
 * Takes, takes over or re-enters the lock under the attempt's own `holdId`, or (`mode` 'wait') queues
 * the wait `waiterId` of `owner` (FIFO). The waiter id is one lock() or tryLock() call's own, a single
 * attempt's too. The fair lock keeps its holds by id in the reentrant lock's `grants` (see hold-ids.lua).
 */
export const FAIR_LOCK = defineScript({
  file: 'fair-lock-7.lua',
  keys: ['lock', 'queue', 'deadlines', 'fence', 'channel', 'grants', 'waiterHolds'],
  args: {
    leaseMs: num,
    owner: str,
    staleWaiterTimeout: num,
    acceptanceLease: num,
    publish,
    holdId: str,
    waiterId: str,
    mode: arg<'wait' | 'once'>(),
    idleKeyTtl: num,
  },
  reply: asIs<FairAttemptReply>,
});

/** Yes: it was locked (deleted with its hold ids, and handed to the next live waiter). A repeat of one `callId` changes nothing. */
export const FAIR_FORCE_UNLOCK = defineScript({
  file: 'fair-force-unlock-8.lua',
  keys: ['lock', 'queue', 'deadlines', 'fence', 'channel', 'forced', 'grants', 'waiterHolds'],
  args: { acceptanceLease: num, publish, callId: str, idleKeyTtl: num },
  reply: yesNo,
});

/**
 * Releases the hold `holdId` names (`which` 'one'), or any one hold of `owner` under the call's own id
 * (`which` 'any'); the last one hands the lock to the next live waiter.
 */
export const FAIR_UNLOCK = defineScript({
  file: 'fair-unlock-7.lua',
  keys: ['lock', 'queue', 'deadlines', 'fence', 'channel', 'grants', 'waiterHolds'],
  args: {
    owner: str,
    holdId: str,
    leaseMs: num,
    acceptanceLease: num,
    publish,
    which: arg<'one' | 'any'>(),
    idleKeyTtl: num,
  },
  reply: asIs<Exclude<ReleaseReply, 'kept'>>,
});

/** Yes: the hand-off was made to this wait (`waiterId`) and is now a hold with the lease, recorded under `holdId`. */
export const FAIR_ACCEPT = defineScript({
  file: 'fair-accept-3.lua',
  keys: ['lock', 'grants', 'fence'],
  args: { leaseMs: num, owner: str, waiterId: str, holdId: str, idleKeyTtl: num },
  reply: yesNo,
});

/**
 * Yes: the lock had been handed to this wait and is now passed on to the next waiter. The wait leaves
 * the queue (`owner` '': not known, only a hand-off to it is passed on). A hold a hand-over recorded for
 * it is released by its id: `holdId` (the one a late message named), or '' whichever (the wait took none).
 */
export const FAIR_ABANDON = defineScript({
  file: 'fair-abandon-7.lua',
  keys: ['lock', 'queue', 'deadlines', 'fence', 'channel', 'grants', 'waiterHolds'],
  args: { waiterId: str, owner: str, holdId: str, acceptanceLease: num, publish, idleKeyTtl: num },
  reply: yesNo,
});

// Read-write lock: both sides' attempts see every hold and intent; each side records its holds by id
// in a grants hash of its own (writeGrants, readGrants), and a release names the hold it ends.

/** Both sides' releases take the same arguments and give the same replies (see UNLOCK for `which`). */
function sideRelease<K extends string>(file: string, keys: readonly K[]) {
  return defineScript({
    file,
    keys,
    args: { owner: str, holdId: str, leaseMs: num, publish, which: arg<'one' | 'any'>() },
    reply: asIs<Exclude<ReleaseReply, 'kept'>>,
  });
}

/** A read hold under the attempt's own hold id, unless a writer holds the lock or a live writer intent waits. */
export const READ_LOCK = defineScript({
  file: 'rw-read-lock-6.lua',
  keys: ['write', 'readers', 'readCounts', 'writers', 'fence', 'readGrants'],
  args: { leaseMs: num, owner: str, holdId: str, idleKeyTtl: num },
  reply: asIs<AttemptReply>,
});

/**
 * The write hold under the attempt's own hold id, or an intent of wait `waitId` that holds back new
 * readers (`intentMs` 0: no intent).
 */
export const WRITE_LOCK = defineScript({
  file: 'rw-write-lock-7.lua',
  keys: ['write', 'readers', 'readCounts', 'writers', 'fence', 'writeGrants', 'readGrants'],
  args: { leaseMs: num, owner: str, intentMs: num, holdId: str, idleKeyTtl: num, waitId: str },
  reply: asIs<WriteAttemptReply>,
});

/** Releases one read hold; the last one of all wakes the writers. */
export const READ_UNLOCK = sideRelease('rw-read-unlock-5.lua', [
  'write',
  'readers',
  'readCounts',
  'writeChannel',
  'readGrants',
]);

/** What is left of the longest live read hold (ms), -2 when none is live. */
export const READ_PTTL = defineScript({
  file: 'rw-read-pttl-1.lua',
  keys: ['readers'],
  args: {},
  reply: asIs<number>,
});

/** An owner's live read holds (0 once its hold ran out). */
export const READ_HOLD_COUNT = defineScript({
  file: 'rw-read-hold-count-2.lua',
  keys: ['readers', 'readCounts'],
  args: { owner: str },
  reply: asIs<number>,
});

/** Releases one write hold; the last one wakes readers and writers. */
export const WRITE_UNLOCK = sideRelease('rw-write-unlock-6.lua', [
  'write',
  'readers',
  'readChannel',
  'writeChannel',
  'writeGrants',
  'fence',
]);

/** The read hold of an attempt whose reply never came, claimed if it landed and is live, else cancelled for good. */
export const READ_CLAIM_ATTEMPT = defineScript({
  file: 'rw-read-claim-3.lua',
  keys: ['readers', 'readCounts', 'readGrants'],
  args: { holdId: str, owner: str },
  reply: asIs<ClaimReply>,
});

/** Yes: the withdrawn intent (wait `waitId`'s alone) was the last one holding readers back (they were woken). */
export const WRITE_ABANDON = defineScript({
  file: 'rw-write-abandon-3.lua',
  keys: ['write', 'writers', 'readChannel'],
  args: { owner: str, publish, waitId: str },
  reply: yesNo,
});

/** Yes: that side was held (its holds and their ids deleted). A repeat of one `callId` changes nothing. */
export const READ_WRITE_FORCE_UNLOCK = defineScript({
  file: 'rw-force-unlock-8.lua',
  keys: ['write', 'readers', 'readCounts', 'readChannel', 'writeChannel', 'forced', 'writeGrants', 'readGrants'],
  args: { side: arg<'read' | 'write'>(), publish, callId: str },
  reply: yesNo,
});

/**
 * [write pttl, flat write (owner, count) pairs, flat reader (owner, count, ms left) triples, live readers
 * in all, flat waiting writer (owner, ms left) pairs, waiting writers in all, fence]: see rw-inspect-5.lua.
 */
export type ReadWriteInspectReply = [
  number,
  string[],
  (string | number)[],
  number,
  (string | number)[],
  number,
  string | null,
];

/** A read-write lock's holds on both sides and its waiting writers, read-only, each list cut at `most`. */
export const READ_WRITE_INSPECT = defineScript({
  file: 'rw-inspect-5.lua',
  keys: ['write', 'readers', 'readCounts', 'writers', 'fence'],
  args: { most: num },
  reply: asIs<ReadWriteInspectReply>,
});

// Any kind.

/** [type, pttl, flat holder triples, fence, flat queue triples, waiting client ids]: see inspect-5.lua. */
export type InspectReply = [string, number, string[], string | false | null, (string | number)[], string[]];

export const INSPECT = defineScript({
  file: 'inspect-5.lua',
  keys: ['lock', 'fence', 'queue', 'deadlines', 'waiting'],
  args: {},
  reply: asIs<InspectReply>,
});

/** What records a kind's holds (see hold-state-2.lua). */
export type HoldKind = 'hash' | 'string' | 'zset';

/** [PTTL of the hold key, the holder's hold (false: none), the fencing counter (false: none)]. */
export type HoldStateReply = [number, string | null, string | null];

/** One read of a hold and its fence, always on the master (see hold-state-2.lua). */
export const HOLD_STATE = defineScript({
  file: 'hold-state-2.lua',
  keys: ['lock', 'fence'],
  args: { holder: str, kind: arg<HoldKind>() },
  reply: asIs<HoldStateReply>,
});

/**
 * The watchdog's renewal of many holds in one call: the idle key TTL, then keys and (kind, lease,
 * owner) triples laid out per hold (see renew-many-n.lua); one reply per hold, 1 renewed, 0 no longer held.
 */
export const RENEW_MANY = new VariableKeysScript('renew-many-n.lua', asIs<number[]>);

/** Every declared script (the contract test walks it). */
export const ALL_SCRIPTS = [
  LOCK,
  UNLOCK,
  CLAIM_ATTEMPT,
  PASS_WAKE,
  FORCE_UNLOCK,
  SIMPLE_LOCK,
  SIMPLE_UNLOCK,
  SIMPLE_CLAIM,
  REDLOCK_GRANT,
  REDLOCK_RELEASE,
  FAIR_LOCK,
  FAIR_UNLOCK,
  FAIR_FORCE_UNLOCK,
  FAIR_ACCEPT,
  FAIR_ABANDON,
  READ_LOCK,
  READ_UNLOCK,
  READ_PTTL,
  READ_HOLD_COUNT,
  WRITE_LOCK,
  WRITE_UNLOCK,
  READ_CLAIM_ATTEMPT,
  WRITE_ABANDON,
  READ_WRITE_FORCE_UNLOCK,
  READ_WRITE_INSPECT,
  SEMAPHORE_ACQUIRE,
  SEMAPHORE_CLAIM,
  SEMAPHORE_RELEASE,
  SEMAPHORE_SET_PERMITS,
  SEMAPHORE_STATE,
  SEMAPHORE_INSPECT,
  INSPECT,
  HOLD_STATE,
] as const;
