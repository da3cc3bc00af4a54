import type { LockLostError } from '../errors';
import type { ReleaseOutcome } from '../holds/lock-handle';

/**
 * The lock kinds that emit events. A RedLock emits its own, once per operation, on its first master's
 * client (its per-master votes emit none); a MultiLock emits through its member locks.
 */
export type LockKindName = 'reentrant' | 'fair' | 'simple' | 'read' | 'write' | 'semaphore' | 'redlock';

interface LockEventBase {
  name: string;
  kind: LockKindName;
  /** The owner id (reentrant, fair, RedLock) or the hold's token (simple lock, semaphore permits). */
  owner: string;
  /** The acquisition's bounded name for metrics (AcquireOptions.label), when it gave one. */
  label?: string;
}

/** An acquisition succeeded (a re-entry too, with `reentered`). */
export interface LockAcquiredEvent extends LockEventBase {
  /** Undefined for a RedLock, which has no single token: see `fencingTokens`. */
  fencingToken?: number;
  /** A RedLock's: one per master, null where it holds nothing. */
  fencingTokens?: (number | null)[];
  /** From the call to its grant, including any wait. */
  waitedMs: number;
  reentered: boolean;
}

/** An acquisition was refused and starts waiting (once per acquisition). */
export type LockWaitingEvent = LockEventBase;

/** An acquisition ended without the lock: its wait ran out, or a single attempt was refused. */
export interface LockTimedOutEvent extends LockEventBase {
  waitedMs: number;
}

/** A release, whatever its outcome (see ReleaseOutcome). */
export interface LockReleasedEvent extends LockEventBase {
  /** Since this owner's first hold was granted. */
  heldMs: number;
  outcome: ReleaseOutcome;
}

/** One watchdog round (every third of watchdogTimeout while watched locks are held). */
export interface LockRenewedEvent {
  renewed: number;
  /** Not renewed: lost (another owner, gone) or Redis unreachable this round. */
  failed: number;
}

/**
 * What a LockClient emits, for metrics and logs of your own. Listeners run synchronously on the
 * lock's path: keep them short. Nothing is built for an event nobody listens to.
 * @example
 * locks.on('acquired', (e) => histogram.record(e.waitedMs, { kind: e.kind }));
 * locks.on('lockLost', (error) => logger.error(error.message));
 */
export interface LockClientEvents {
  acquired: [event: LockAcquiredEvent];
  waiting: [event: LockWaitingEvent];
  timedOut: [event: LockTimedOutEvent];
  released: [event: LockReleasedEvent];
  /** The watchdog's round of renewals: how many Redis confirmed, how many failed. */
  renewed: [event: LockRenewedEvent];
  /** A held lock was lost; the holder's signal was aborted with the same error. */
  lockLost: [error: LockLostError];
}

/** Emits `event` with the payload `make()` builds, only if someone listens (no allocation otherwise). */
export type EmitLockEvent = <E extends Exclude<keyof LockClientEvents, 'lockLost'>>(
  event: E,
  make: () => LockClientEvents[E][0],
) => void;
