import { monotonicNow } from '../util/clock';
import { acquireLoop, type Attempt, type Refusal } from '../waiting/acquire-loop';
import type { HeardPayload } from '../waiting/wait-ticket';
import { closedForGood } from '../redis/connection-end';
import { LockError, LockOptionsError, RedisUnavailableError } from '../errors';
import { retryWhileUnreachable } from '../redis/retry-while-unreachable';
import { settledWithin } from '../util/sleep';
import { onAbort, type WaitSignal } from '../waiting/abort-fan-out';
import type { HeldLock } from '../holds/held-lock';
import { LockHandle } from '../holds/lock-handle';
import { checkAcquireOptions, type AcquireOptions } from './acquire-options';
import { assertBelievableLease } from './believable-lease';
import type { Grant, HoldFacts, LockSide, WaitBehaviour } from './lock-side';
import { LockCall } from './lock-call';

/** A hold recorded for one acquisition: its owner's record and the hold's own id (see LockHandle). */
interface Taken {
  held: HeldLock;
  holdId: string;
}

/**
 * How long, in operation timeouts, a grant whose master stopped answering before its replicas did is
 * checked for on the master that serves the key next: as long as connecting may take, which a
 * sentinel failover fits in.
 */
const FAILOVER_CHECK_TIMEOUTS = 3;

/** At most how long a wait pauses after a grant that came too late (see grantedTooLate), ms. */
const TOO_LATE_PAUSE_MS = 1_000;

/**
 * Grants in a row that came too late, each of a free lock (no refusal between them), after which a wait
 * with no waitTime gives up: its lease is shorter than a grant takes to arrive, so no attempt ever holds.
 */
const TOO_LATE_LIMIT = 3;

/** The grant went down with the master that made it: wait again on the master that serves the key now. */
export const LOST_IN_FAILOVER = Symbol('lost in failover');

/**
 * One `lock()` / `tryLock()` of `side` (`defaultWaitTime`: when the caller gives no waitTime): the
 * handle, or the refusing holder's TTL when the wait ran out. Reports `acquired` / `timedOut`, and
 * waits again on the new master when a grant was lost in a failover.
 */
export async function acquireLock(
  side: LockSide,
  given: AcquireOptions,
  defaultWaitTime?: number,
): Promise<LockHandle | { ttl: number }> {
  const { waits } = side.engine;
  // close() waits until this call has ended, its clean-up included.
  waits.begin();
  try {
    const options = checkAcquireOptions(side.name, given, defaultWaitTime);
    const { driftFactor } = side.engine.registry;
    assertBelievableLease(side.name, options.leaseTime, (given as AcquireOptions).leaseTime, driftFactor);
    const signal = waits.signalFor(options.signal);
    // One owner for the whole call, also when it waits anew (see acquireOnce): outside any scope it is the
    // call's own, and a wait's traces in Redis (a writer's intent) are named by it.
    const owner = side.ownerFor(options.owner);
    return await acquireOnce(side, options, owner, signal, new LockCall(), defaultWaitTime);
  } catch (error) {
    // Ended by close(): told with this lock's name, as an attempt begun after close() is.
    if (error === waits.signal.reason) throw closedError(side.name);
    throw error;
  } finally {
    waits.end();
  }
}

/**
 * One acquisition with checked options by `owner`, ended when `signal` aborts (the caller's or the
 * client's closing); again from the start after a failover lost its grant.
 */
async function acquireOnce(
  side: LockSide,
  options: AcquireOptions,
  owner: string,
  signal: WaitSignal,
  lockCall: LockCall,
  defaultWaitTime?: number,
): Promise<LockHandle | { ttl: number }> {
  const { engine, name, kind } = side;
  const leaseTime = options.leaseTime ?? side.defaultLeaseTime();
  const behaviour = side.waitBehaviour(owner, lockCall);
  const { label } = options;
  // A release of this owner's hold still being retried must land first: sent after a new grant,
  // a repeat of it could release that grant.
  const settling = engine.registry.settled(side.keys.lock, owner);
  if (settling) {
    // It lands once Redis can be reached: waited for within the call's own bounds, as an outage is
    // (waitTime, at least one operationTimeout), never for the rest of the released hold's lease.
    const bound = Math.max(options.waitTime ?? 0, engine.operationTimeout);
    const waitedFrom = monotonicNow();
    if (!(await landsWithin(settling, bound, signal))) {
      throw new RedisUnavailableError(name, 'lock', bound);
    }
    const { waitTime } = options;
    if (waitTime !== undefined) {
      const left = Math.max(0, waitTime - (monotonicNow() - waitedFrom));
      return acquireOnce(
        side,
        checkAcquireOptions(name, { ...options, waitTime: left }, defaultWaitTime),
        owner,
        signal,
        lockCall,
        defaultWaitTime,
      );
    }
  }
  const startedAt = monotonicNow();
  const leaseMs = leaseTime ?? engine.watchdogTimeout;
  const call = new LockAcquisition(side, {
    owner,
    options,
    signal,
    leaseMs,
    watched: leaseTime === undefined,
    behaviour,
    lockCall,
  });
  try {
    const outcome = await call.run();
    if (outcome === LOST_IN_FAILOVER) {
      // The grant went down with the master that made it: wait for the lock again, for what is
      // left of waitTime, on the master that serves it now.
      const { waitTime } = options;
      const left = waitTime === undefined ? undefined : Math.max(0, waitTime - (monotonicNow() - startedAt));
      return await acquireOnce(
        side,
        checkAcquireOptions(name, { ...options, waitTime: left }, defaultWaitTime),
        owner,
        signal,
        lockCall,
        defaultWaitTime,
      );
    }
    if (outcome instanceof LockHandle) {
      engine.lockEvent('acquired', () => ({
        name,
        kind,
        owner: outcome.owner,
        label,
        fencingToken: outcome.fencingToken,
        waitedMs: monotonicNow() - startedAt,
        reentered: outcome.holdCount > 1,
      }));
      return outcome;
    }
    await side.abandonWait(owner, behaviour.waiterId, options.waitTime !== 0, lockCall);
    engine.lockEvent('timedOut', () => ({ name, kind, owner, label, waitedMs: monotonicNow() - startedAt }));
    return outcome;
  } catch (error) {
    call.giveUp();
    await side.abandonWait(owner, behaviour.waiterId, options.waitTime !== 0, lockCall).catch(() => undefined);
    throw error;
  }
}

/** Why an acquisition of lock `name` ends when its client is closed. */
function closedError(name: string): LockError {
  return new LockError(`The lock client is closed: lock "${name}" is not acquired.`, name);
}

/** Whether `settling` settles within `ms`; rejects with the signal's reason if it aborts first. */
async function landsWithin(settling: Promise<unknown>, ms: number, signal: WaitSignal): Promise<boolean> {
  signal.throwIfAborted();
  let stopListening: (() => void) | undefined;
  const aborted = new Promise<never>((_, reject) => {
    stopListening = onAbort(signal, () => reject(signal.reason));
  });
  try {
    return (
      (await Promise.race([
        settledWithin(
          settling.then(() => true),
          ms,
        ),
        aborted,
      ])) === true
    );
  } finally {
    stopListening?.();
  }
}

/** What one acquisition call asks for, its options checked. */
export interface AcquireRequest {
  owner: string;
  options: AcquireOptions;
  /** What ends the wait: the caller's signal, the client's closing (see ClosingWaits.signalFor). */
  signal: WaitSignal;
  leaseMs: number;
  /** No explicit lease: the watchdog renews it. */
  watched: boolean;
  behaviour: WaitBehaviour;
  /** The lock() or tryLock() call this acquisition is (again, after a failover) part of. */
  lockCall: LockCall;
}

/**
 * One `lock()` / `tryLock()` call: attempts in the acquire loop until granted, refused for good or out
 * of time. It remembers across attempts what a retry must know: an attempt whose reply never came
 * (which may hold the lock: asked about before the next attempt, or taken back if the caller gives
 * up), whether the caller was refused before (so its process is registered as waiting), and the
 * connection epoch of the last attempt (see ReplicaSync.epoch).
 */
export class LockAcquisition {
  /** The last attempt's reply never came: it may hold the lock (see grantOfUnknownAttempt). */
  private unknown?: { holder: string; sentAt: number; holdId: string };
  private refusedBefore = false;
  private grantedIn = 0;
  /**
   * The grant re-entered a hold of ours and lengthened the lease it believes: the end believed before
   * (a longer lease a failover lost is a grant lost, see run()).
   */
  private lengthenedFrom?: number;
  /** The take-back of a grant that came too late (see grantedTooLate), until the next attempt. */
  private undoing?: Promise<void>;
  /** Grants that came too late since the last refusal or kept grant (see TOO_LATE_LIMIT). */
  private tooLateInARow = 0;
  private readonly attemptOnce = (payload: HeardPayload | undefined, othersWaiting: boolean) =>
    this.attempt(payload, othersWaiting);

  constructor(
    private readonly side: LockSide,
    private readonly request: AcquireRequest,
  ) {}

  /** The handle of the grant, the refusing holder's TTL when the wait ran out, or LOST_IN_FAILOVER. */
  async run(): Promise<LockHandle | { ttl: number } | typeof LOST_IN_FAILOVER> {
    const { side, request } = this;
    const { engine } = side;
    const { options, behaviour } = request;
    const outcome = await acquireLoop<Taken>({
      key: side.name,
      waiters: engine.waiters,
      waitTime: options.waitTime,
      signal: request.signal,
      operationTimeout: engine.operationTimeout,
      connectionGone: () => closedForGood(engine.redis),
      expectGrant: side.turns()?.expectsGrant(),
      queueBehindWokenMs: options.waitTime === 0 ? undefined : side.turns()?.queueBehindWoken(),
      // Written out, not spread: a spread of a behaviour object copies it through V8's slow path.
      channel: behaviour.channel ?? side.keys.channel,
      waiterId: behaviour.waiterId,
      maxSleep: behaviour.maxSleep,
      onUnclaimed: behaviour.onUnclaimed,
      onUnheard: behaviour.onUnheard,
      quietRecheckMs: behaviour.quietRecheckMs,
      broadcast: behaviour.broadcast,
      shareRetries: behaviour.shareRetries,
      attempt: this.attemptOnce,
    });
    if (!outcome.acquired) return { ttl: outcome.ttl };
    const { held, holdId } = outcome.value;
    const handle = new LockHandle(held, holdId);
    if (engine.waits.signal.aborted) {
      // Granted while the client closed (the attempt was on its way): not kept, nobody would renew it.
      await handle.release().catch(() => undefined);
      throw closedError(side.name);
    }
    // A re-entry is waited for only when it lengthened the lease this client believes.
    const before = this.lengthenedFrom;
    const syncing =
      handle.holdCount > 1 && before === undefined
        ? undefined
        : engine.replicaSync.afterGrant(side.name, side.keys.lock, this.grantedIn, () => handle.release());
    if (syncing && (await syncing) === 'unverified' && !(await this.survivedFailover(held, holdId, before))) {
      return LOST_IN_FAILOVER;
    }
    return handle;
  }

  /** The caller gave up (an error): an attempt whose reply never came is taken back if Redis granted it. */
  giveUp(): void {
    if (this.unknown) this.undoInBackground(this.unknown.holder, this.request.leaseMs, this.unknown.holdId);
  }

  private async attempt(payload: HeardPayload | undefined, othersWaiting: boolean): Promise<Attempt<Taken>> {
    const { side } = this;
    // No attempt once the client is closed: a wait still running ends (close() aborts its signal).
    if (side.engine.waits.signal.aborted) throw closedError(side.name);
    const { owner, options, leaseMs, watched, lockCall } = this.request;
    const { label } = options;
    this.grantedIn = side.engine.replicaSync.epoch;
    if (this.unknown) {
      const { holder, sentAt, holdId } = this.unknown;
      // The claim makes the lease at least leaseMs, counted from the lost attempt's sentAt as before.
      const grant = await side.bounded(side.grantOfUnknownAttempt(holder, holdId, leaseMs), 'lock');
      this.unknown = undefined;
      if (grant) {
        const hold = { leaseMs, watched, sentAt, label, holdId, firstLease: undefined };
        const held = this.record(holder, grant, hold);
        if (held.expiresAt <= monotonicNow()) return this.grantedTooLate(held, holder, holdId, sentAt);
        return { acquired: true, value: { held, holdId } };
      }
    }
    if (this.undoing) {
      // A grant taken back may share what this attempt sends (a semaphore wait's member): it lands first.
      await side.bounded(this.undoing, 'lock');
      this.undoing = undefined;
    }
    side.turns()?.attempting();
    const holder = side.holderFor(owner);
    const holdId = side.engine.newHoldId();
    const sentAt = monotonicNow();
    let result: Attempt<Grant>;
    try {
      const waiting = options.waitTime === 0 ? undefined : { othersWaiting, refusedBefore: this.refusedBefore };
      const request = { owner, leaseMs, holder, payload, waiting, holdId, lockCall };
      result = await side.bounded(side.attempt(request), 'lock');
    } catch (error) {
      if (error instanceof RedisUnavailableError) this.unknown = { holder, sentAt, holdId };
      throw error;
    }
    if (!result.acquired) {
      this.tooLateInARow = 0;
      if (!this.refusedBefore && options.waitTime !== 0) {
        side.engine.lockEvent('waiting', () => ({ name: side.name, kind: side.kind, owner, label }));
      }
      this.refusedBefore = true;
      return result;
    }
    const { value } = result;
    // A hand-over told in a message was recorded under the id the waiter registered, not this attempt's.
    const taken = value.handedOver?.holdId ?? holdId;
    const firstLease = value.handedOver?.firstLease;
    const hold = { leaseMs, watched, sentAt, label, holdId: taken, firstLease };
    const held = this.record(value.holder ?? holder, value, hold);
    if (held.expiresAt <= monotonicNow()) return this.grantedTooLate(held, value.holder ?? holder, taken, sentAt);
    this.tooLateInARow = 0;
    return { acquired: true, value: { held, holdId: taken } };
  }

  /**
   * A grant whose reply came when the lease the holder would believe had already ended (a slow reply,
   * a short leaseTime; counted from when its attempt was sent, less the drift): Redis may have let it
   * run out and granted the lock to another. Never handed out: its hold is taken back by its id (nothing
   * else of the owner's), or left to the wait's next attempt (see LockSide.retryAdoptsHold), and the
   * wait goes on as after a refusal, within its waitTime.
   */
  private grantedTooLate(held: HeldLock, holder: string, holdId: string, sentAt: number): Refusal {
    // A record of earlier holds too: their lease, believed to the same end, is over as well.
    if (held.holdCount > 1) held.markLost('lease-expired');
    else held.forget();
    const { leaseMs, options } = this.request;
    // Left for the wait's next attempt when that takes it as its own; a single attempt has none.
    if (!this.side.retryAdoptsHold || options.waitTime === 0) {
      this.undoing = this.undoInBackground(holder, leaseMs, holdId);
    }
    if (++this.tooLateInARow >= TOO_LATE_LIMIT && options.waitTime === undefined) {
      const { name } = this.side;
      throw new LockOptionsError(
        `leaseTime ${leaseMs} ms ran out ${TOO_LATE_LIMIT} times in a row before its grant's reply arrived (the ` +
          `last after ${Math.round(monotonicNow() - sentAt)} ms), with lock "${name}" free: no attempt can hold it ` +
          'over this connection. Give a longer lease (or a waitTime to keep trying).',
        name,
        { option: 'leaseTime', value: options.leaseTime },
      );
    }
    // Not again at once: a reply that slow may come as slowly next time. The lease, doubling while it goes
    // on (a release here wakes the wait sooner).
    return { acquired: false, ttl: Math.min(leaseMs * 2 ** (this.tooLateInARow - 1), TOO_LATE_PAUSE_MS) };
  }

  /** Records the grant (see LockSide.recordHold), noting whether it re-entered and lengthened our lease. */
  private record(holder: string, grant: Grant, hold: HoldFacts): HeldLock {
    const { side } = this;
    const { registry } = side.engine;
    // (No lookup when this client holds nothing: the common case of an uncontended acquisition.)
    const existing = registry.size === 0 ? undefined : registry.get(side.keys.lock, holder);
    const before = existing?.expiresAt;
    const held = side.recordHold(holder, grant, hold);
    this.lengthenedFrom = held === existing && before !== undefined && held.expiresAt > before ? before : undefined;
    return held;
  }

  /**
   * After a grant whose replica sync was cut off (its master stopped answering): whether the master
   * serving the key now, once it can be reached, has the hold. If not, the record is dropped (there
   * is nothing of ours to release). Redis unreachable for that long: the record is dropped,
   * the hold taken back in the background should it be there after all, and RedisUnavailableError.
   */
  private async survivedFailover(held: HeldLock, holdId: string, reentryBefore?: number): Promise<boolean> {
    const { side } = this;
    const { redis, operationTimeout } = side.engine;
    const until = monotonicNow() + FAILOVER_CHECK_TIMEOUTS * operationTimeout;
    const check = () => side.grantOfUnknownAttempt(held.owner, holdId, held.leaseMs);
    try {
      if (await retryWhileUnreachable(check, { redis, operationTimeout, until, key: side.name, name: 'lock' })) {
        return true;
      }
    } catch (error) {
      this.dropHold(held, holdId, reentryBefore);
      this.undoInBackground(held.owner, held.leaseMs, holdId);
      throw error;
    }
    this.dropHold(held, holdId, reentryBefore);
    return false;
  }

  /** A grant the master serving the key now lacks: a first grant's record goes; a re-entry's hold only. */
  private dropHold(held: HeldLock, holdId: string, reentryBefore: number | undefined): void {
    if (reentryBefore === undefined) held.forget();
    else held.undoReentry(holdId, reentryBefore);
  }

  /**
   * Takes back an attempt's hold that nobody will use or renew (its reply never came, or its master
   * failed over), retrying through the outage until it lands or the lease is certainly over; the same
   * owner's next grant waits for it.
   */
  private undoInBackground(holder: string, leaseMs: number, holdId: string): Promise<void> {
    const { side } = this;
    const { redis, operationTimeout, registry } = side.engine;
    const until = monotonicNow() + leaseMs + operationTimeout;
    const send = () => side.releaseOnce(holder, leaseMs, holdId);
    const options = { redis, operationTimeout, until, key: side.name, name: 'undo unanswered attempt' };
    const sent = retryWhileUnreachable(send, options).then(
      () => undefined,
      () => undefined,
    );
    registry.inFlightFor(side.keys.lock, holder, sent);
    return sent;
  }
}
