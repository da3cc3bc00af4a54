import type { Grant } from '../lock/lock-base';
import type { ClaimReply } from '../scripts/replies';

/**
 * What a release call of a kind that records holds by id names (see lua/include/release-call.lua):
 * the hold it ends ('one'), or, with none known (an unlock by owner of a hold this client did not
 * take), any one hold of the owner under the call's own id `callId` (or a fresh one) ('any'), which its
 * repeats carry.
 */
export function releaseCallOf(
  holdId: string | undefined,
  newHoldId: () => string,
  callId?: string,
): { holdId: string; which: 'one' | 'any' } {
  return holdId === undefined ? { holdId: callId ?? newHoldId(), which: 'any' } : { holdId, which: 'one' };
}

/** An unanswered attempt settled by its id (claim-attempt-3.lua and the like): its grant, or none. */
export function claimedGrant(reply: ClaimReply): Grant | undefined {
  if (reply[0] === 'cancelled') return undefined;
  return { fencingToken: reply[1], reentered: reply[0] === 'reentered' };
}
