import type { Attempt } from './acquire-loop';
import type { LockKindName } from './lock-events';
import type { RenewalKind } from './held-lock';
import { LockBase, type Grant, type RawRelease, type WaitingAttempt, waitingFlag } from './lock-base';
import type { HandOver } from './process-turns';
import { runScript } from './scripts';

const RELEASE_RESULTS: Record<number, RawRelease> = {
  1: 'released',
  2: 'kept',
  0: 'decremented',
  [-1]: 'not-locked',
  [-2]: 'not-owner',
};

/**
 * Redisson's RLock: a hash `{owner: holdCount}` with a lease, re-entrant per owner scope, waiters
 * woken by pub/sub, the lease renewed by the watchdog while held, a fencing token per first
 * acquisition.
 * @example
 * const lock = locks.getLock('report:daily');
 * await lock.withLock(async ({ signal }) => buildReport({ signal }));
 */
export class ReentrantLock extends LockBase {
  readonly kind: LockKindName = 'reentrant';
  protected override readonly takesTurns: boolean = true;
  protected async attempt(
    owner: string,
    leaseMs: number,
    _payload?: string,
    _holder?: string,
    waiting?: WaitingAttempt,
  ): Promise<Attempt<Grant>> {
    const [status, value] = await runScript<[number, number]>(
      this.engine.redis,
      'lock',
      [this.keys.lock, this.keys.fence, this.keys.waiting, this.keys.next],
      [leaseMs, owner, this.engine.clientId, waitingFlag(waiting)],
    );
    if (status === 2) return { acquired: false, ttl: value };
    return { acquired: true, value: { fencingToken: value, reentered: status === 1 } };
  }

  protected async releaseOnce(
    owner: string,
    leaseMs: number,
    expectedHolds?: number,
    handOver: HandOver = 'pass',
  ): Promise<RawRelease> {
    const result = await runScript<number>(
      this.engine.redis,
      'unlock',
      [this.keys.lock, this.keys.channel, this.keys.waiting, this.keys.next],
      [owner, leaseMs, this.engine.publishCommand, 'released', expectedHolds ?? '', handOver],
    );
    return RELEASE_RESULTS[result];
  }

  protected readonly renewal: RenewalKind = 'hash';

  /** Whether the current lock scope's owner holds this lock. */
  async isHeldByCurrentScope(): Promise<boolean> {
    return (await this.getHoldCount()) > 0;
  }

  /** How many holds the current scope's owner (or `owner`) has on this lock; 0 when none. */
  async getHoldCount(owner = this.scopeOwner()): Promise<number> {
    if (owner === undefined) return 0;
    const count = await this.bounded(this.engine.redis.hget(this.keys.lock, owner), 'getHoldCount');
    return count === null ? 0 : Number(count);
  }
}
