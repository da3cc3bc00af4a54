import type { AcquireLoopOptions, Attempt } from '../waiting/acquire-loop';
import type { EngineContext } from '../client/engine-context';
import type { LockKindName } from '../client/lock-events';
import type { Acquisition, HeldLock } from '../holds/held-lock';
import type { ReleaseReplayer } from '../holds/recent-releases';
import type { LockKeys } from '../redis/keys';
import type { ReleaseReply } from '../scripts/replies';
import type { HandOver } from '../turns/process-turns';
import type { LockTurns } from '../turns/lock-turns';
import type { LeaseFrom } from '../util/server-clock';
import type { HeardPayload } from '../waiting/wait-ticket';
import type { LockCall } from './lock-call';

/** A granted attempt: the fencing token and whether the owner already held the lock. */
export interface Grant {
  fencingToken: number;
  reentered: boolean;
  /** The id the hold is recorded, renewed and released under, when not the owner itself (simple lock's token). */
  holder?: string;
  /** A first grant found other processes waiting for the lock (see TurnAttemptReply). */
  othersWaiting?: boolean;
  /** The lock was handed to this waiter in a message: no request of this attempt set it (see HandedOver). */
  handedOver?: HandedOver;
}

/**
 * A grant the releasing script made for a waiter and told it of in a message. The waiter's own
 * request did not set its lease, so the hold is recorded under the id the waiter registered, and
 * believes only the hand-over's short lease until a renewal of its own lands (see HeldLock).
 */
export interface HandedOver {
  /** The hold id the releasing script recorded the hold under: the one the waiter registered with. */
  holdId: string;
  /**
   * The hand-over's lease, as a command sent at `sentAt` would have set it (see leaseFromAnchor). None
   * when this attempt's own command took the hold over with its full lease (an acceptance, or an attempt
   * that found the hold handed to its wait): the hold is then counted from the attempt's `sentAt`.
   */
  firstLease?: LeaseFrom;
}

/** One acquisition attempt, as a kind's script takes it. */
export interface AttemptRequest {
  owner: string;
  leaseMs: number;
  /** The id a grant is recorded and released under: the owner, or a token per acquisition (see holderFor). */
  holder: string;
  /** What the message that woke the waiter carried for it (see LockWaiters). */
  payload?: HeardPayload;
  /** Set when the caller waits if refused. */
  waiting?: WaitingAttempt;
  /** This attempt's own id: the hold it takes is recorded under it (see lua/include/hold-ids.lua). */
  holdId: string;
  /** The lock() or tryLock() call the attempt is made for (see LockCall). */
  lockCall: LockCall;
}

/** An attempt made by a caller that waits if refused. */
export interface WaitingAttempt {
  /** Other waiters of this process wait for the same lock. */
  othersWaiting: boolean;
  /** This waiter was refused before (so its process is registered as waiting). */
  refusedBefore: boolean;
}

/** How a kind's waiters wait (see AcquireLoopOptions). */
export type WaitBehaviour = Partial<
  Pick<
    AcquireLoopOptions<unknown>,
    'channel' | 'waiterId' | 'maxSleep' | 'onUnclaimed' | 'onUnheard' | 'quietRecheckMs' | 'broadcast' | 'shareRetries'
  >
>;

/** What Redis did with one release (see REPLY_MEANINGS). */
export type RawRelease = ReleaseReply;

/**
 * What an acquisition and a release of one lock ask of its kind (LockBase builds it once per lock):
 * its scripts, its turns, and the client's bounded calls. The parts that act on a lock (LockAcquisition,
 * LockRelease) see the kind through this alone.
 */
export interface LockSide {
  readonly name: string;
  readonly kind: LockKindName;
  readonly keys: LockKeys;
  readonly engine: EngineContext;
  /** This lock's part in its process's turns; undefined for a kind that takes none. */
  turns(): LockTurns | undefined;
  /** One Redis call bounded by operationTimeout, named `what` when it fails (see bounded.ts). */
  bounded<T>(operation: Promise<T>, what: string): Promise<T>;
  /** The id a grant is recorded and released under: the owner, or a token per attempt (simple lock). */
  holderFor(owner: string): string;
  /**
   * A later attempt of the same wait sends the same holder and takes a hold it finds under it as its own
   * (a semaphore wait's member): a grant that came too late is left for it, not taken back (see
   * LockAcquisition.grantedTooLate); a wait that ends without the lock gives it back (abandonWait).
   */
  readonly retryAdoptsHold: boolean;
  /** The owner an acquisition holds for: `explicit`, else the current scope's, else a fresh one. */
  ownerFor(explicit: string | undefined): string;
  /** The lease when the caller gives none; undefined = the watchdog's lease, renewed while held. */
  defaultLeaseTime(): number | undefined;
  /** How this kind's waiters for `owner` wait in `lockCall` (see LockBase.waitBehaviour). */
  waitBehaviour(owner: string, lockCall: LockCall): WaitBehaviour;
  /** A wait of `lockCall` that ended without the lock (see LockBase.abandonWait). */
  abandonWait(owner: string, waiterId: string | undefined, waited: boolean, lockCall: LockCall): Promise<void>;
  /** One acquisition attempt (see LockBase.attempt). */
  attempt(request: AttemptRequest): Promise<Attempt<Grant>>;
  /** Whether an attempt whose reply never came was granted (see LockBase.grantOfUnknownAttempt). */
  grantOfUnknownAttempt(holder: string, holdId: string, leaseMs: number): Promise<Grant | undefined>;
  /** Releases one hold, safe to send again (see LockBase.releaseOnce). */
  releaseOnce(owner: string, leaseMs: number, holdId?: string, handOver?: HandOver): Promise<RawRelease>;
  /** Leaves the waiting registry and wakes the next process if the lock is free (best effort). */
  passWakeUp(): Promise<void>;
  /**
   * Whether `held`'s owner still holds the lock in the epoch of `held`'s grant (its count there, the
   * fencing counter still its token); false for kinds that do not record holds by id.
   */
  holdsInEpoch(held: HeldLock): Promise<boolean>;
  /** Sends a release again after a failover (see RecentReleases). */
  readonly replayer: ReleaseReplayer;
  /** Records a grant's hold in the client's registry. */
  recordHold(holder: string, grant: Grant, hold: HoldFacts): HeldLock;
}

/** What a grant's hold is recorded with, besides its Redis id and the grant (see Acquisition). */
export type HoldFacts = Pick<Acquisition, 'leaseMs' | 'watched' | 'sentAt' | 'label' | 'holdId' | 'firstLease'>;
