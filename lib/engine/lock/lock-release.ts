import { monotonicNow } from '../util/clock';
import { closedForGood } from '../redis/connection-end';
import { isOutage } from '../redis/outage';
import { retryWhileUnreachable } from '../redis/retry-while-unreachable';
import { settledWithin, sleep } from '../util/sleep';
import type { HeldLock } from '../holds/held-lock';
import type { ReleaseOutcome } from '../holds/release-outcome';
import type { HandOver } from '../turns/process-turns';
import type { LockSide, RawRelease } from './lock-side';

/**
 * Sends an operation that is safe to repeat (it carries an id of its call), and again while Redis
 * cannot be reached, so that a lost reply still gets a final answer: a copy whose reply never comes
 * is given up on after one operationTimeout, and the next goes out on the connection that replaced
 * it. Bounded: past two operationTimeouts the caller gets RedisUnavailableError.
 */
export function sendUntilAnswered<T>(side: Pick<LockSide, 'engine' | 'name'>, send: () => Promise<T>): Promise<T> {
  const { redis, operationTimeout } = side.engine;
  const until = monotonicNow() + 2 * operationTimeout;
  return retryWhileUnreachable(send, { redis, operationTimeout, until, key: side.name, name: 'unlock' });
}

/**
 * The releases of one lock's holds recorded by this client (`held.release()`). A release Redis cannot
 * take (see isOutage) is sent again (it is idempotent) until it lands or the lease has certainly ended,
 * so a failover never leaves the lock behind for a lease; the caller hears 'pending' if none landed
 * within one operationTimeout.
 */
export class LockRelease {
  constructor(private readonly side: LockSide) {}

  release(held: HeldLock, holdId?: string): Promise<ReleaseOutcome> {
    // Released already; lost too: this hold was ended by another process's unlock({ owner }).
    if (held.released) return Promise.resolve(held.lost ? 'expired' : 'released');
    // A `then`, not an async function: every release makes this call.
    return this.releaseHold(held, holdId).then((outcome) => {
      const { name, kind, engine } = this.side;
      engine.lockEvent('released', () => ({
        name,
        kind,
        owner: held.owner,
        label: held.label,
        heldMs: monotonicNow() - held.grantedAt,
        outcome,
      }));
      return outcome;
    });
  }

  private async releaseHold(held: HeldLock, which?: string): Promise<ReleaseOutcome> {
    const { side } = this;
    const { final, holdId } = held.beginRelease(which);
    // A repeat is sent late: the turn is surely over by then.
    const send = (handOver: HandOver = 'pass') => side.releaseOnce(held.owner, held.leaseMs, holdId, handOver);
    const turns = side.turns();
    const handOver = turns && final ? turns.handOverFor() : 'pass';
    const startedAt = monotonicNow();
    let raw: RawRelease;
    try {
      raw = await side.bounded(send(handOver), 'unlock');
    } catch (error) {
      if (!isOutage(error) || closedForGood(side.engine.redis)) {
        held.releaseFailed(final, holdId);
        throw error;
      }
      const retried = this.retryRelease(held, holdId, () => send(), final);
      // The first copy may have landed as 'kept', the lock reserved for this process's turn, which a
      // repeat (answered as that copy was) does not undo: pass it on once a copy lands.
      if (handOver === 'keep') void retried.then(() => side.passWakeUp());
      side.engine.registry.inFlightFor(held.key, held.owner, retried);
      // The caller waits for the repeats up to one operationTimeout in all: a reconnect (a failover's
      // switch, a revived connection) is over well within it, and then the answer is a final one.
      const result = await settledWithin(retried, startedAt + side.engine.operationTimeout - monotonicNow());
      if (result instanceof Error) throw result;
      return result ?? 'pending';
    }
    // (Checked before the call: an async call and its await on every release cost more than the check.)
    if (raw === 'not-owner' && (await this.lostOnlyThisHold(held, raw, final))) return 'decremented';
    return this.settle(held, holdId, raw, final, false, handOver);
  }

  /**
   * A hold that is not the owner's last, which Redis never had (a re-entry a failover lost: re-entries
   * are not replica-synced) while the owner's earlier holds stand: no loss to report.
   */
  private async lostOnlyThisHold(held: HeldLock, raw: RawRelease, final: boolean): Promise<boolean> {
    if (raw !== 'not-owner' || final || held.lost) return false;
    return this.side.holdsInEpoch(held).catch(() => false);
  }

  private settle(
    held: HeldLock,
    holdId: string,
    raw: RawRelease,
    final: boolean,
    repeated: boolean,
    handOver: HandOver = 'pass',
  ): ReleaseOutcome {
    const turns = this.side.turns();
    if (raw === 'released' || raw === 'kept') {
      held.markReleased();
      // Kept for a few seconds, to be sent again if a failover may have lost it (see RecentReleases).
      this.side.engine.recentReleases.note(this.side.replayer, held.key, held.owner, holdId, held.leaseMs);
      turns?.released(handOver, raw);
      return 'released';
    }
    if (raw === 'decremented') {
      // Sent again after a failover too: lost there, the owner's outer release would leave this hold behind.
      this.side.engine.recentReleases.note(this.side.replayer, held.key, held.owner, holdId, held.leaseMs);
      held.markDecremented(final);
      return 'decremented';
    }
    if (repeated && final) {
      // Gone: our earlier send landed before its reply was lost, or the lease ran out; either way no
      // hold of ours is left.
      held.markReleased();
      return monotonicNow() < held.expiresAt ? 'released' : 'expired';
    }
    if (final) turns?.released(handOver, raw); // the hold was gone: so is the turn
    if (held.lost) {
      held.forget(); // already reported
      return 'expired';
    }
    // It ran out before we released it: the work ran unprotected for a while; say so loudly.
    held.markLost(raw === 'not-owner' ? 'not-owner' : 'lease-expired');
    return 'expired';
  }

  /**
   * Sends a release that could not reach Redis again, backing off, until it lands or the lease is over.
   * Resolves to the release's outcome once it lands, or to the error it gave up on (never rejects).
   */
  private async retryRelease(
    held: HeldLock,
    holdId: string,
    send: () => Promise<RawRelease>,
    final: boolean,
  ): Promise<ReleaseOutcome | Error> {
    const { name, engine } = this.side;
    const { logger, operationTimeout, redis } = engine;
    logger.warn(`Could not reach Redis to release lock "${name}"; retrying until it lands or the lease ends.`);
    try {
      await sleep(25);
      // The lease cannot outlast its last renewal's reply, which came within operationTimeout of the send.
      const until = held.expiresAt + operationTimeout;
      const raw = await retryWhileUnreachable(send, { redis, operationTimeout, until, key: name, name: 'unlock' });
      if (await this.lostOnlyThisHold(held, raw, final)) return 'decremented';
      return this.settle(held, holdId, raw, final, true);
    } catch (error) {
      held.forget(); // the lease is over (or Redis refused): nothing of ours is left to release
      logger.warn(`Gave up releasing lock "${name}": ${(error as Error).message}`);
      return error as Error;
    }
  }
}
