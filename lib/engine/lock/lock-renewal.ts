import { monotonicNow } from '../util/clock';
import { LockLostError } from '../errors';
import type { HeldLock } from '../holds/held-lock';
import { RENEW_MANY } from '../scripts/catalog';
import { checkDuration, LEASE_RULE } from '../util/validation';
import type { LockSide } from './lock-side';

/**
 * Extends the lease of a hold recorded by this client (`held.extend()`): to `leaseTime`, or its own
 * lease again, from now. Throws LockLostError (and reports the loss) when Redis no longer has the hold.
 */
export async function extendHold(
  side: Pick<LockSide, 'name' | 'engine' | 'bounded'>,
  held: HeldLock,
  leaseTime?: number,
): Promise<void> {
  leaseTime = checkDuration(side.name, 'leaseTime', leaseTime, LEASE_RULE);
  if (held.lost) throw new LockLostError(side.name, held.owner, 'lease-expired');
  const leaseMs = leaseTime ?? held.leaseMs;
  const sentAt = monotonicNow();
  const renewal = RENEW_MANY.run(side.engine.redis, held.renewalKeys, [
    side.engine.idleKeyTtl,
    held.renewal,
    leaseMs,
    held.owner,
  ]);
  const [renewed] = await side.bounded(renewal, 'extend');
  if (renewed !== 1) {
    held.markLost('not-owner');
    throw new LockLostError(side.name, held.owner, 'not-owner');
  }
  held.leaseSet(sentAt, leaseMs);
  if (!held.watched) {
    held.leaseMs = leaseMs;
    held.armExpiry();
  }
}
