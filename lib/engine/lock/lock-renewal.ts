import { monotonicNow } from '../util/clock';
import { LockLostError } from '../errors';
import type { HeldLock, RenewalKind } from '../holds/held-lock';
import { retryWhileUnreachable } from '../redis/retry-while-unreachable';
import { RENEW_MANY } from '../scripts/catalog';
import { checkDuration, LEASE_RULE } from '../util/validation';
import type { LockSide } from './lock-side';

/**
 * Extends the lease of a hold recorded by this client (`held.extend()`): to `leaseTime`, or its own
 * lease again, from now. Throws LockLostError (and reports the loss) when Redis no longer has the hold.
 * Replica sync applies as to a grant: an extension whose master stopped answering before a replica had
 * it is sent again to the master serving the lock now (a failover may have lost it), and believed only
 * once that one has it (not for a RedLock's vote, `synced` false: its grants are not synced either).
 * `onLanded` is called once the master has set the lease, before any wait for its replicas.
 */
export async function extendHold(
  side: Pick<LockSide, 'name' | 'engine' | 'bounded'>,
  held: HeldLock,
  leaseTime?: number,
  synced = true,
  onLanded?: () => void,
): Promise<void> {
  leaseTime = checkDuration(side.name, 'leaseTime', leaseTime, LEASE_RULE);
  if (held.lost) throw new LockLostError(side.name, held.owner, 'lease-expired');
  const leaseMs = leaseTime ?? held.leaseMs;
  const { engine } = side;
  // A lease given sets it, shorter or not; a renewal never shortens it (another process of a shared
  // owner may count on a longer one, see renew-many-n.lua).
  const kind = leaseTime === undefined ? held.renewal : settingKind(held.renewal);
  const renew = () => RENEW_MANY.run(engine.redis, held.renewalKeys, [engine.idleKeyTtl, kind, leaseMs, held.owner]);
  let sentAt = monotonicNow();
  const epoch = engine.replicaSync.epoch;
  let [renewed] = await side.bounded(renew(), 'extend');
  if (renewed === 1) onLanded?.();
  if (renewed === 1 && synced) {
    const syncing = engine.replicaSync.afterGrant(side.name, held.key, epoch, () => Promise.resolve());
    if (syncing && (await syncing) === 'unverified') {
      // Not on a replica when its master went: believed once the master serving the key now has it.
      const { redis, operationTimeout } = engine;
      const until = held.expiresAt;
      sentAt = monotonicNow();
      [renewed] = await retryWhileUnreachable(renew, {
        redis,
        operationTimeout,
        until,
        key: side.name,
        name: 'extend',
      });
    }
  }
  if (held.holdCount === 0 && !held.lost) {
    // Its last release was sent while this extension was on its way (or has landed): the hold was given
    // back, not lost. Neither reported lost nor re-armed (its expiry timer would report it lost later).
    if (renewed !== 1) throw new LockLostError(side.name, held.owner, 'not-owner');
    return;
  }
  if (renewed !== 1 || held.lost) {
    held.markLost('not-owner');
    throw new LockLostError(side.name, held.owner, 'not-owner');
  }
  held.leaseSet(sentAt, leaseMs, leaseTime !== undefined);
  // A RedLock follows its votes' leases: a renewal of one made here (its own first-lease renewal) counts.
  held.onRenewed?.(sentAt, leaseMs);
  if (!held.watched) {
    held.leaseMs = leaseMs;
    held.armExpiry();
  } else if (leaseTime !== undefined) {
    // Set shorter maybe than the watchdog's next round is away: renewed in time, or told at its end.
    held.leaseSetWhileWatched();
  }
}

/** The renew-many-n.lua kind that sets a hold's lease to the one given, shorter or not. */
function settingKind(kind: RenewalKind): string {
  return kind === 'held' ? 'held-set' : kind === 'read' ? 'read-set' : kind;
}
