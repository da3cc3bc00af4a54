import type { EngineContext } from '../client/engine-context';
import type { HandOver } from './process-turns';
import type { ReleaseReply } from '../scripts/replies';

/** What a lock that takes turns lends its LockTurns. */
export interface TurnTaker {
  /** The lock's key, the one ProcessTurns keeps turns by. */
  readonly key: string;
  /** The channel this process's waiters for the lock listen on (see wake-one-process.lua). */
  readonly processChannel: string;
  /** Leaves the waiting registry and wakes the next process if the lock is free. */
  passWakeUp(): Promise<void>;
}

/**
 * One lock's part in its process's turns (see ProcessTurns): what a reentrant or simple lock does
 * around each grant and each release so that, while other processes wait, the process keeps the lock
 * for a turn.
 */
export class LockTurns {
  constructor(
    private readonly engine: EngineContext,
    private readonly lock: TurnTaker,
  ) {}

  /** Before an attempt (see ProcessTurns.passIfIdle). */
  attempting(): void {
    this.engine.turns.attempting(this.lock.key);
  }

  /** Whether this process's next attempt is all but sure to be granted (see ProcessTurns.expectsGrant). */
  expectsGrant(): boolean {
    return this.engine.turns.expectsGrant(this.lock.key);
  }

  /** How long a new acquisition waits behind the parked waiter a kept release woke (see ProcessTurns.queueBehindWoken). */
  queueBehindWoken(): number | undefined {
    return this.engine.turns.queueBehindWoken(this.lock.key);
  }

  /** A first hold (not a re-entry) was granted: a turn begins, if none runs. */
  granted(): void {
    this.engine.turns.granted(this.lock.key);
  }

  /** How a last release should leave the lock: kept in this process's turn, or passed on. */
  handOverFor(): HandOver {
    return this.engine.turns.handOverFor(this.lock.key);
  }

  /** How long a release kept now reserves the free lock for this process (see ProcessTurns.reservationMs). */
  reservationMs(): number {
    return this.engine.turns.reservationMs(this.lock.key);
  }

  /** A last release made with `handOver` came back `raw`. */
  released(handOver: HandOver, raw: ReleaseReply): void {
    if (raw === 'kept') return this.keep();
    // Passed on, released with nobody else waiting, or the hold was gone: the turn is over.
    this.engine.turns.end(this.lock.key);
    // Released in the turn with no other process waiting: this process's own parked waiters, if any,
    // take it from here (nobody else is told).
    if (raw === 'released' && handOver === 'keep') this.engine.waiters.wakeParked(this.lock.processChannel);
  }

  /**
   * Released in this process's turn while other processes wait: a parked waiter of this process takes
   * the lock now, or this process asks for it again at once, or it is passed on.
   */
  private keep(): void {
    const { waiters, turns } = this.engine;
    const { key, processChannel } = this.lock;
    turns.kept(key);
    if (waiters.wakeParked(processChannel)) {
      // That waiter takes it: an acquisition of this process made meanwhile queues behind it, not
      // racing it to Redis (one of the two would be refused, and sent again once seated).
      turns.wokeParked(key);
      return;
    }
    turns.passIfIdle(
      key,
      () => waiters.memberCount(processChannel) > 0,
      () => this.lock.passWakeUp(),
    );
  }
}
