import type { Attempt } from './acquire-loop';
import type { HeldLock } from './held-lock';
import type { EngineContext } from './engine-context';
import type { Grant, RawRelease } from './lock-base';
import { assertDuration } from './options';
import { ReentrantLock } from './reentrant-lock';
import { runScript } from './scripts';

const RELEASE_RESULTS: Record<number, RawRelease> = {
  1: 'released',
  0: 'decremented',
  [-1]: 'not-locked',
  [-2]: 'not-owner',
};

export interface FairLockOptions {
  /**
   * A waiter that has not refreshed its place for this long counts as dead and is dropped from the
   * queue. Waiters refresh every third of it. Default 5000 ms.
   */
  staleWaiterTimeout?: number;
  /**
   * Lease of a lock just handed to the next waiter, until its acceptance (sent as it wakes) applies
   * its own lease. Bounds what a waiter that died at that moment costs. Default 2000 ms.
   */
  acceptanceLease?: number;
}

export const FAIR_LOCK_DEFAULTS = { staleWaiterTimeout: 5_000, acceptanceLease: 2_000 } as const;

/**
 * Redisson's RFairLock, improved: waiters queue in FIFO order (a list plus a zset of deadlines in
 * Redis server time); the releasing script hands the lock straight to the next live waiter and
 * tells only that waiter, so a hand-off costs one message and no race. Re-entrant like the
 * reentrant lock, and mutually exclusive with it on the same name.
 * @example
 * await locks.getFairLock('ticket-counter').withLock(() => serveNext());
 */
export class FairLock extends ReentrantLock {
  private readonly staleWaiterTimeout: number;
  private readonly acceptanceLease: number;

  constructor(engine: EngineContext, name: string, options: FairLockOptions = {}) {
    super(engine, name);
    assertDuration(name, 'staleWaiterTimeout', options.staleWaiterTimeout, { positive: true });
    assertDuration(name, 'acceptanceLease', options.acceptanceLease, { positive: true });
    this.staleWaiterTimeout = options.staleWaiterTimeout ?? FAIR_LOCK_DEFAULTS.staleWaiterTimeout;
    this.acceptanceLease = options.acceptanceLease ?? FAIR_LOCK_DEFAULTS.acceptanceLease;
  }

  /** Each process listens on its own channel per lock; the message names the waiter to wake. */
  private channelFor(owner: string): string {
    return `${this.keys.channel}:${owner.split(':', 1)[0]}`;
  }

  protected override waitBehaviour(owner: string) {
    return {
      channel: this.channelFor(owner),
      waiterId: owner,
      // Retrying refreshes our deadline, and covers a message that got lost.
      maxSleep: Math.max(1, Math.floor(this.staleWaiterTimeout / 3)),
    };
  }

  protected override async attempt(owner: string, leaseMs: number, payload?: string): Promise<Attempt<Grant>> {
    // The release handed us the lock and said so: it is ours already, on the short acceptance lease.
    if (payload !== undefined && /^\d+$/.test(payload)) {
      // Replica sync must see a write of ours to wait for: take it over now.
      if (this.engine.replicaSync && (await this.acceptScript(owner, leaseMs)) !== 1) {
        return { acquired: false, ttl: 0 };
      }
      return { acquired: true, value: { fencingToken: Number(payload), reentered: false, handedOver: true } };
    }
    // Re-entering a hold still on its acceptance lease: take it over first, so the script counts it.
    await this.findHeld(owner)?.pendingAcceptance?.run();
    const [status, value] = await runScript<[number, number]>(
      this.engine.redis,
      'fair-lock',
      [this.keys.lock, this.keys.queue, this.keys.deadlines, this.keys.fence, this.keys.channel],
      [leaseMs, owner, this.staleWaiterTimeout, this.acceptanceLease, this.engine.publishCommand],
    );
    if (status === 2) return { acquired: false, ttl: value };
    return { acquired: true, value: { fencingToken: value, reentered: status === 1 } };
  }

  /**
   * Takes a handed-over hold over lazily, a third of the acceptance lease after the hand-off (or at
   * once when re-entered): a short critical section releases before that and never pays the round
   * trip; the release script treats the untaken hold as one hold.
   */
  protected override onHandedOver(held: HeldLock): void {
    if (this.engine.replicaSync) return; // taken over already (see attempt)
    let accepting: Promise<void> | undefined;
    const run = (): Promise<void> => (accepting ??= this.accept(held));
    const timer = setTimeout(() => void run(), Math.max(1, Math.floor(this.acceptanceLease / 3)));
    timer.unref();
    held.pendingAcceptance = { timer, run };
  }

  private async accept(held: HeldLock): Promise<void> {
    if (held.released || held.lost) return;
    const sentAt = Date.now();
    try {
      const accepted = await this.acceptScript(held.owner, held.leaseMs);
      if (held.released || held.lost) return;
      held.dropAcceptance();
      if (accepted !== 1) return this.engine.markLost(held, 'not-owner');
      held.expiresAt = sentAt + held.leaseMs;
      held.armExpiry((lock, reason) => this.engine.markLost(lock, reason));
    } catch {
      if (!held.released) this.engine.markLost(held, 'unreachable');
    }
  }

  private acceptScript(owner: string, leaseMs: number): Promise<number> {
    return this.bounded(
      runScript<number>(this.engine.redis, 'fair-accept', [this.keys.lock], [leaseMs, owner]),
      'accept hand-off',
    );
  }

  protected override releaseOnce(owner: string, leaseMs: number, force = false): Promise<RawRelease> {
    return runScript<number>(
      this.engine.redis,
      'fair-unlock',
      [this.keys.lock, this.keys.queue, this.keys.deadlines, this.keys.fence, this.keys.channel],
      [owner, leaseMs, this.acceptanceLease, this.engine.publishCommand, force ? '1' : '0'],
    ).then((result) => RELEASE_RESULTS[result]);
  }

  /** Leaves the queue; if the lock was handed to us meanwhile, passes it on to the next waiter. */
  protected override async abandonWait(owner: string): Promise<void> {
    const handedToUs = await this.bounded(
      runScript<number>(
        this.engine.redis,
        'fair-abandon',
        [this.keys.lock, this.keys.queue, this.keys.deadlines, this.keys.channel],
        [owner, this.engine.publishCommand],
      ),
      'abandon wait',
    );
    if (handedToUs === 1) await this.bounded(this.releaseOnce(owner, this.acceptanceLease), 'pass on');
  }

  /** Deletes the lock whoever holds it and hands it to the next waiter. True when it was locked. */
  override async forceUnlock(): Promise<boolean> {
    return (await this.bounded(this.releaseOnce('', this.acceptanceLease, true), 'forceUnlock')) === 'released';
  }
}
