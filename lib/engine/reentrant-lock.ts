import type { Attempt } from './acquire-loop';
import type { LockKindName } from './lock-events';
import { HashLock } from './hash-lock';
import { attemptOutcome, type Grant, type RawRelease, type AttemptRequest, waitingFlag } from './lock-base';
import type { HandOver } from './process-turns';
import { LOCK, UNLOCK } from './scripts/catalog';

/**
 * Redisson's RLock: a hash `{owner: holdCount}` with a lease, re-entrant per owner scope, waiters
 * woken by pub/sub, the lease renewed by the watchdog while held, a fencing token per first
 * acquisition.
 * @example
 * const lock = locks.getLock('report:daily');
 * await lock.withLock(async ({ signal }) => buildReport({ signal }));
 */
export class ReentrantLock extends HashLock {
  readonly kind: LockKindName = 'reentrant';
  protected override readonly takesTurns: boolean = true;
  protected async attempt({
    holder,
    leaseMs,
    waiting,
    prior,
    tokens,
    heldBefore,
  }: AttemptRequest): Promise<Attempt<Grant>> {
    const { redis, clientId } = this.engine;
    const [status, value, othersWaiting] = await LOCK.run(redis, this.keys, {
      leaseMs,
      owner: holder,
      clientId,
      waiting: waitingFlag(waiting),
      priorOwner: prior?.holder ?? '',
      priorHolds: prior?.expectedHolds ?? '',
      tokens,
      heldBefore,
    });
    return attemptOutcome(status, value, undefined, othersWaiting);
  }

  protected releaseOnce(
    owner: string,
    leaseMs: number,
    expectedHolds?: number,
    handOver: HandOver = 'pass',
  ): Promise<RawRelease> {
    const { redis, publishCommand, clientId } = this.engine;
    return UNLOCK.run(redis, this.keys, {
      owner,
      leaseMs,
      publish: publishCommand,
      message: 'released',
      expectedHolds: expectedHolds ?? '',
      handOver,
      clientId,
    });
  }
}
