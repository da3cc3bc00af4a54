/**
 * Every status word a Lua script replies with, and what it means. A word means the same in every
 * script, and the scripts return the words themselves (`return 'released'`), so a reply reads the
 * same in a script, in its TypeScript declaration, in a test and in `redis-cli MONITOR`.
 * Yes/no replies (force-unlock, pass-wake, accept, abandon) are 1 and 0 and are not listed.
 * test/engine/script-contracts.spec.ts checks that lua/ returns no other word and uses every one.
 */
export const REPLY_MEANINGS = {
  // Acquisition attempts reply {status, value[, permits free]}.
  granted: 'acquired by an owner that held nothing; value: its fencing token',
  reentered: 'acquired again by an owner that holds it; value: the fencing token of its first hold',
  refused: 'not acquired; value: how long (ms) until it may be free, -1 when no lease is there to wait for',
  cancelled: 'an unanswered attempt that never landed (now it never will), or whose hold ended already',
  'holds-read': 'a write attempt by an owner that holds the read side: an upgrade, refused (it would deadlock)',
  // Releases reply with one word.
  released: "the owner's last hold is gone; the next waiter was told",
  kept: "the owner's last hold is gone in its process's turn; nobody was told (see ProcessTurns)",
  decremented: 'one hold released and others of the owner remain, or this release had landed before',
  'not-locked': 'nothing to release: the lock is not held (it expired or was never taken)',
  'not-owner': 'nothing released: someone else holds the lock',
} as const;

export type AttemptStatus = 'granted' | 'reentered' | 'refused';
/** An acquisition attempt's reply: refused with the time to wait, or granted with a fencing token. */
export type AttemptReply = [status: AttemptStatus, value: number];
/**
 * A fair-lock attempt's reply: a queued refusal also carries Redis's clock when it ran (server ms), and a
 * grant of the hold handed over to this wait the id it was recorded under (see fair-lock-7.lua).
 */
export type FairAttemptReply =
  | AttemptReply
  | [status: 'refused', pttl: number, serverMs: number]
  | [status: 'granted', token: number, handedHoldId: string];
/**
 * The reply of an attempt on a lock whose processes take turns: a grant also tells whether other
 * processes wait (1) or not (0), so that the turn it begins knows it is contended.
 */
export type TurnAttemptReply = AttemptReply | [status: 'granted', value: number, othersWaiting: 0 | 1];
/** How an unanswered attempt was settled (see claim-attempt-3.lua). */
export type ClaimReply = [status: 'granted' | 'reentered', value: number] | [status: 'cancelled'];
/** A write attempt's reply: an attempt's, or the refusal of an upgrade. */
export type WriteAttemptReply = AttemptReply | [status: 'holds-read', value: number];
/** What a release did (see REPLY_MEANINGS). */
export type ReleaseReply = 'released' | 'kept' | 'decremented' | 'not-locked' | 'not-owner';

// Each union above only uses words of the table (a compile-time check).
type Word = keyof typeof REPLY_MEANINGS;
const _replyWordsAreListed: [AttemptStatus, WriteAttemptReply[0], ReleaseReply, ClaimReply[0]] extends [
  Word,
  Word,
  Word,
  Word,
]
  ? true
  : never = true;
void _replyWordsAreListed;
