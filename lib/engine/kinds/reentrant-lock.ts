import type { Attempt } from '../waiting/acquire-loop';
import type { LockKindName } from '../client/lock-events';
import { HashLock } from './hash-lock';
import { attemptOutcome, type Grant, type RawRelease, type AttemptRequest, waitingFlag } from '../lock/lock-base';
import type { HandOver } from '../turns/process-turns';
import { releaseCallOf } from '../holds/hold-id-calls';
import { LOCK, UNLOCK } from '../scripts/catalog';
import type { TurnAttemptReply } from '../scripts/replies';

/**
 * Redisson's RLock: a hash `{owner: holdCount}` with a lease, re-entrant per owner scope, waiters
 * woken by pub/sub, the lease renewed by the watchdog while held, a fencing token per first
 * acquisition. Each hold also has an id of its own (lua/include/hold-ids.lua): a release names the
 * hold it ends and a repeated command is recognised by its id, never by a count this client remembers.
 * @example
 * const lock = locks.getLock('report:daily');
 * await lock.withLock(async ({ signal }) => buildReport({ signal }));
 */
export class ReentrantLock extends HashLock {
  readonly kind: LockKindName = 'reentrant';
  protected override readonly takesTurns: boolean = true;
  protected attempt({ holder, leaseMs, waiting, holdId }: AttemptRequest): Promise<Attempt<Grant>> {
    const { redis, clientId, idleKeyTtl } = this.engine;
    // A `then`, not an async function: every acquisition makes this call.
    return LOCK.run(redis, this.keys, {
      idleKeyTtl,
      leaseMs,
      owner: holder,
      clientId,
      waiting: waitingFlag(waiting),
      holdId,
    }).then(lockOutcome);
  }

  /** Releases hold `holdId`; without one (an unlock by owner of a hold taken elsewhere), any hold of `owner`. */
  protected releaseOnce(
    owner: string,
    leaseMs: number,
    holdId?: string,
    handOver: HandOver = 'pass',
    callId?: string,
  ): Promise<RawRelease> {
    const { redis, publishCommand, clientId, newHoldId } = this.engine;
    return UNLOCK.run(redis, this.keys, {
      owner,
      ...releaseCallOf(holdId, newHoldId, callId),
      leaseMs,
      publish: publishCommand,
      message: 'released',
      handOver,
      clientId,
      turnMs: this.turnMsFor(handOver),
    });
  }
}

function lockOutcome(reply: TurnAttemptReply): Attempt<Grant> {
  return attemptOutcome(reply[0], reply[1], undefined, reply[2]);
}
