import { monotonicNow } from '../util/clock';
import { randomUUID } from 'node:crypto';
import { acquireLoop, type AcquireLoopOptions, type Attempt } from '../waiting/acquire-loop';
import { bounded } from '../redis/bounded';
import { writesToFixedServer } from '../redis/fixed-server';
import { closedForGood } from '../redis/connection-end';
import type { EngineContext } from '../client/engine-context';
import { LockAcquireTimeoutError, LockLostError, LockNotHeldError, RedisUnavailableError } from '../errors';
import type { Acquisition, HeldLock, HoldOps, RenewalKind } from '../holds/held-lock';
import { lockKeys, type LockKeys } from '../redis/keys';
import { LockHandle, type LockContext, type ReleaseOutcome } from '../holds/lock-handle';
import { checkAcquireOptions, type AcquireOptions } from './options';
import { assertLockName, assertOptionsObject, checkDuration, LEASE_RULE } from '../util/validation';
import { currentScope, runAsCriticalSection, type OwnerScope } from '../holds/owner-scope';
import {
  FORCE_UNLOCK,
  HOLD_STATE,
  PASS_WAKE,
  RENEW_MANY,
  type HoldKind,
  type HoldStateReply,
  type WaitingFlag,
} from '../scripts/catalog';
import type { AttemptStatus, ReleaseReply } from '../scripts/replies';
import { retryWhileUnreachable } from '../redis/retry-while-unreachable';
import { refreshSlotsSoon } from '../redis/slot-refresh';
import type { LockKindName } from '../client/lock-events';
import { settledWithin, sleep } from '../util/sleep';
import type { LockLogger } from '../util/logger';
import type { RedisClient } from '../redis/redis-client';
import { withLock } from './with-lock';
import type { ReleaseReplayer } from '../holds/recent-releases';
import type { HandOver } from '../turns/process-turns';
import { LockTurns } from '../turns/lock-turns';
import { isOutage } from '../redis/outage';
import type { SyncVerdict } from '../redis/replica-sync';

/** What a grant's hold is recorded with, besides its Redis id and the grant (see Acquisition). */
type HoldFacts = Pick<Acquisition, 'leaseMs' | 'watched' | 'sentAt' | 'label' | 'holdId'>;

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

/** A granted attempt: the fencing token and whether the owner already held the lock. */
export interface Grant {
  fencingToken: number;
  reentered: boolean;
  /** The id the hold is recorded, renewed and released under, when not the owner itself (simple lock's token). */
  holder?: string;
  /** A first grant found other processes waiting for the lock (see TurnAttemptReply). */
  othersWaiting?: boolean;
}

/**
 * Waiters of a process that heard nothing for this long try once more: a wake-up goes to one process,
 * which may be frozen (or the message lost), and the lock must not sit free while the others sleep.
 */
export const QUIET_RECHECK_MS = 1_000;

/** How a kind's waiters wait (see AcquireLoopOptions). */
export type WaitBehaviour = Partial<
  Pick<
    AcquireLoopOptions<unknown>,
    'channel' | 'waiterId' | 'maxSleep' | 'onUnclaimed' | 'onUnheard' | 'quietRecheckMs' | 'broadcast'
  >
>;

/** One acquisition attempt, as a kind's script takes it. */
export interface AttemptRequest {
  owner: string;
  leaseMs: number;
  /** The id a grant is recorded and released under: the owner, or a token per acquisition (see holderFor). */
  holder: string;
  /** What the message that woke the waiter carried for it (see LockWaiters). */
  payload?: string;
  /** Set when the caller waits if refused. */
  waiting?: WaitingAttempt;
  /** This attempt's own id: the hold it takes is recorded under it (see lua/include/hold-ids.lua). */
  holdId: string;
}

/** An attempt made by a caller that waits if refused. */
export interface WaitingAttempt {
  /** Other waiters of this process wait for the same lock. */
  othersWaiting: boolean;
  /** This waiter was refused before (so its process is registered as waiting). */
  refusedBefore: boolean;
}

/** An attempt script's reply as the acquire loop takes it. */
export function attemptOutcome(
  status: AttemptStatus,
  value: number,
  holder?: string,
  othersWaiting?: 0 | 1,
): Attempt<Grant> {
  if (status === 'refused') return { acquired: false, ttl: value };
  return {
    acquired: true,
    value: { fencingToken: value, reentered: status === 'reentered', holder, othersWaiting: othersWaiting === 1 },
  };
}

/** The waiting flag of lock-4.lua / simple-lock-4.lua for an attempt. */
export function waitingFlag(waiting: WaitingAttempt | undefined): WaitingFlag {
  if (!waiting) return 'once';
  if (waiting.othersWaiting) return '1';
  return waiting.refusedBefore ? '0' : '-';
}

/** What Redis did with one release (see REPLY_MEANINGS). */
export type RawRelease = ReleaseReply;

export interface WithLockOptions extends AcquireOptions {
  /** Run in a fresh owner scope even inside another one (no re-entry with the caller's locks). */
  newScope?: boolean;
}

/**
 * The behaviour every lock kind shares: owner resolution, waiting, handles, release bookkeeping,
 * lost-lock reporting. A kind supplies its scripts through the four abstract members.
 */
export abstract class LockBase implements ReleaseReplayer {
  readonly keys: LockKeys;
  /** Which kind this is, as lock events name it. */
  abstract readonly kind: LockKindName;

  /** `keysOf`: the kind's keys for a checked name (a read-write lock's sides have their own). */
  constructor(
    protected readonly engine: EngineContext,
    readonly name: string,
    keysOf: (prefix: string, name: string) => LockKeys = lockKeys,
  ) {
    assertLockName(name);
    this.keys = keysOf(engine.keyPrefix, name);
  }

  /** One acquisition attempt (see AttemptRequest). */
  protected abstract attempt(request: AttemptRequest): Promise<Attempt<Grant>>;
  /**
   * Releases one hold of `owner`: hold `holdId` where the kind records holds by id (none given: any
   * one hold of `owner`, under the call's own id `callId`, or a fresh one); a simple lock's or a
   * semaphore's `owner` is the acquisition's own token. Safe to send again after an unknown outcome: a
   * repeat (with the same ids) changes nothing. `handOver`: see ProcessTurns (kinds that do not take
   * turns ignore it).
   */
  protected abstract releaseOnce(
    owner: string,
    leaseMs: number,
    holdId?: string,
    handOver?: HandOver,
    callId?: string,
  ): Promise<RawRelease>;
  /** How this kind's holds are renewed (watchdog, extend). */
  protected abstract readonly renewal: RenewalKind;

  /** The keys a renewal of this kind touches, in renew-many-n.lua's order for `renewal`. */
  protected get renewalKeys(): readonly string[] {
    return (this.lockAndFence ??= [this.keys.lock, this.keys.fence]);
  }

  private lockAndFence?: readonly string[];

  /** Whether processes take turns on this kind when it is contended (see ProcessTurns). */
  protected readonly takesTurns: boolean = false;

  /**
   * What a release made with `handOver` tells Redis of this process's turn: with `keep`, how long it
   * reserves the free lock for the turn (see ProcessTurns.reservationMs); else 0 (unused).
   */
  protected turnMsFor(handOver: HandOver): number {
    return handOver === 'keep' ? this.engine.turns.reservationMs(this.keys.lock) : 0;
  }

  /** This lock's part in its process's turns; undefined for a kind that takes none. */
  private get turns(): LockTurns | undefined {
    if (!this.takesTurns) return undefined;
    return (this.lockTurns ??= new LockTurns(this.engine, {
      key: this.keys.lock,
      processChannel: this.processChannel,
      passWakeUp: () => this.passWakeUp(),
    }));
  }

  private lockTurns?: LockTurns;

  /** Lease used when the caller gives none; undefined = the watchdog's lease, renewed while held. */
  protected readonly defaultLeaseTime: number | undefined = undefined;

  /** The id a grant of this attempt is recorded and released under: the owner, or a token per attempt (simple lock). */
  protected holderFor(owner: string): string {
    return owner;
  }

  /**
   * An attempt whose reply never came (the connection dropped, a failover) may have been granted.
   * Asked before the next attempt, by the attempt's own id (`holdId`, or a simple lock's or semaphore's
   * token `holder`): if it landed, that grant is ours (returned, with its fencing token); if not, a kind
   * that records holds by id cancels it for good, so that a copy still on its way takes nothing.
   */
  protected abstract grantOfUnknownAttempt(holder: string, holdId: string): Promise<Grant | undefined>;

  /**
   * The lease left on `holdKey`, `holder`'s hold in it (of `kind`; null when none or another kind
   * holds the name) and the fencing counter, read in one script call: on the master even through a
   * Cluster client that sends plain reads to replicas (see hold-state-2.lua).
   */
  protected readHold(holdKey: string, holder: string, kind: HoldKind): Promise<HoldStateReply> {
    return HOLD_STATE.run(this.engine.redis, { lock: holdKey, fence: this.keys.fence }, { holder, kind });
  }

  /** Undoes an attempt whose outcome we never learned, if it was granted (idempotent: safe to repeat). */
  private undoUnknownAttempt(holder: string, leaseMs: number, holdId: string): Promise<RawRelease> {
    return this.releaseOnce(holder, leaseMs, holdId);
  }

  /**
   * A wait that ended without the lock (`waited`: it was not a single attempt). The reentrant and
   * simple locks take this process out of the waiting registry once its last waiter gave up, passing
   * on a wake-up that may be on its way (in the background: the caller is not kept waiting for it).
   */
  protected async abandonWait(_owner: string, _waiterId: string | undefined, waited: boolean): Promise<void> {
    if (waited && this.engine.waiters.memberCount(this.processChannel) === 0) void this.passWakeUp();
  }

  /**
   * Reentrant and simple locks: each waiting process listens on its own channel, and a release wakes
   * one of them (see lua/include/wake-one-process.lua), not every process that waits.
   */
  protected waitBehaviour(_owner: string): WaitBehaviour {
    // The same for every acquisition of this lock: built once, off the hot path.
    return (this.processWaiting ??= {
      channel: this.processChannel,
      onUnheard: () => void this.passWakeUp(),
      quietRecheckMs: QUIET_RECHECK_MS,
    });
  }

  private processWaiting?: WaitBehaviour;

  /** The script that takes this process out of the waiting registry and wakes the next one if it can. */
  protected passScript(): Promise<unknown> {
    const { redis, clientId, publishCommand } = this.engine;
    return PASS_WAKE.run(redis, this.keys, { clientId, publish: publishCommand, message: 'released' });
  }

  /** Made once: every kept release of a hot key asks for it. */
  private get processChannel(): string {
    return (this.ownChannel ??= `${this.keys.channel}:${this.engine.clientId}`);
  }

  private ownChannel?: string;

  /** Leaves the waiting registry and, if the lock is free, wakes the next process (best effort). */
  private passWakeUp(): Promise<void> {
    this.engine.turns.end(this.keys.lock);
    return this.bounded(this.passScript(), 'pass wake-up').then(
      () => undefined,
      // Unreachable: the next release skips us once we unsubscribed, and waiters re-check meanwhile.
      () => undefined,
    );
  }

  /**
   * Acquires the lock, waiting as long as it takes (or up to `waitTime`, then throwing
   * LockAcquireTimeoutError).
   * @example
   * const handle = await locks.getLock('invoice:42').lock();
   * try { await work(handle.signal); } finally { await handle.release(); }
   */
  async lock(options: AcquireOptions = {}): Promise<LockHandle> {
    const outcome = await this.acquire(options);
    if (outcome instanceof LockHandle) return outcome;
    throw new LockAcquireTimeoutError(this.name, options.waitTime ?? 0, outcome.ttl > 0 ? outcome.ttl : undefined);
  }

  /** Acquires within `waitTime` (default 0: one attempt) or resolves `null`. */
  async tryLock(options: AcquireOptions = {}): Promise<LockHandle | null> {
    // Only undefined means "not given": null and other values are checked as the caller's.
    const outcome = await this.acquire(options, 0);
    return outcome instanceof LockHandle ? outcome : null;
  }

  /**
   * Runs `fn` holding the lock and releases it however `fn` ends. Without `waitTime` it waits until
   * the lock is free; with one it throws LockAcquireTimeoutError when that runs out.
   * @example
   * await locks.getLock(`order:${id}`).withLock(async ({ signal, fencingToken }) => {
   *   await db.update(order, { fencingToken, signal });
   * });
   */
  withLock<T>(fn: (context: LockContext) => Promise<T> | T, options: WithLockOptions = {}): Promise<T> {
    const report = { logger: this.engine.logger, nameOf: () => this.name };
    // `?.`: options that are not an object reach lock(), which refuses them with a LockOptionsError.
    const newScope = (options as WithLockOptions | null)?.newScope;
    const holds = (scope: OwnerScope) => this.heldInScope(scope);
    return runAsCriticalSection(holds, () => withLock(() => this.lock(options), fn, report), { newScope });
  }

  /**
   * @internal Whether `scope`'s owner holds this lock, as this client last knew it: a `withLock` inside
   * that scope re-enters it (see runAsCriticalSection).
   */
  heldInScope(scope: OwnerScope): boolean {
    const held = this.findHeld(`${this.engine.clientId}:${scope.id}`);
    return held !== undefined && !held.lost;
  }

  /** @internal The client's logger: a MultiLock reports a failed release through its first lock's. */
  get logger(): LockLogger {
    return this.engine.logger;
  }

  /** @internal The client's Redis connection: a MultiLock orders and merges its locks by deployment. */
  get redis(): RedisClient {
    return this.engine.redis;
  }

  /**
   * Releases one hold of the current scope's owner (or `owner`). Outside a lock scope, release with
   * the handle that `lock()` returned instead.
   */
  async unlock(options: { owner?: string } = {}): Promise<ReleaseOutcome> {
    assertOptionsObject(this.name, options);
    const owner = options.owner ?? this.scopeOwner();
    if (owner === undefined) {
      throw new LockNotHeldError(this.name, '(no lock scope)');
    }
    const held = this.findHeld(owner);
    if (held) return this.release(held);
    // A hold this client did not record (another process's, with an explicit owner): any one of the
    // owner's holds, under an id of this call's own, so that the call can be sent again while Redis
    // cannot be reached and still end one hold only.
    const callId = this.engine.newHoldId();
    const raw = await this.sendOnce(() =>
      this.releaseOnce(owner, this.engine.watchdogTimeout, undefined, 'pass', callId),
    );
    if (raw === 'not-locked' || raw === 'not-owner') throw new LockNotHeldError(this.name, owner);
    return raw === 'kept' ? 'released' : raw;
  }

  /**
   * Sends an operation that is safe to repeat (it carries an id of its call), and again while Redis
   * cannot be reached, so that a lost reply still gets a final answer: a copy whose reply never comes
   * is given up on after one operationTimeout, and the next goes out on the connection that replaced
   * it. Bounded: past two operationTimeouts the caller gets RedisUnavailableError.
   */
  protected sendOnce<T>(send: () => Promise<T>): Promise<T> {
    const { redis, operationTimeout } = this.engine;
    const until = monotonicNow() + 2 * operationTimeout;
    return retryWhileUnreachable(send, { redis, operationTimeout, until, key: this.name, name: 'unlock' });
  }

  /** Whether anyone holds the lock. */
  async isLocked(): Promise<boolean> {
    return (await this.bounded(this.readHold(this.keys.lock, '', 'hash'), 'isLocked'))[0] !== -2;
  }

  /** Remaining lease in ms; -2 when not locked (Redis PTTL semantics). */
  async remainTimeToLive(): Promise<number> {
    return (await this.bounded(this.readHold(this.keys.lock, '', 'hash'), 'remainTimeToLive'))[0];
  }

  /** Deletes the lock whoever holds it and wakes the waiters. True when it was locked. */
  async forceUnlock(): Promise<boolean> {
    const { redis, publishCommand } = this.engine;
    return this.bounded(
      FORCE_UNLOCK.run(redis, this.keys, { publish: publishCommand, message: 'force', callId: randomUUID() }),
      'forceUnlock',
    );
  }

  /** How many holds `owner` (none: 0) has in the hash `key`, as Redis counts them. */
  protected async holdCount(key: string, owner: string | undefined): Promise<number> {
    if (owner === undefined) return 0;
    const [, count] = await this.bounded(this.readHold(key, owner, 'hash'), 'getHoldCount');
    return count === null ? 0 : Number(count);
  }

  /** This client's record of `owner`'s hold on this lock. */
  protected findHeld(owner: string): HeldLock | undefined {
    return this.engine.registry.get(this.keys.lock, owner);
  }

  protected scopeOwner(): string | undefined {
    const scope = currentScope();
    return scope ? `${this.engine.clientId}:${scope.id}` : undefined;
  }

  /** Outside any scope every acquisition gets its own owner, so unrelated callers never share a hold. */
  private ownerForAcquire(explicit: string | undefined): string {
    return explicit ?? this.scopeOwner() ?? `${this.engine.clientId}:${randomUUID()}`;
  }

  protected bounded<T>(operation: Promise<T>, what: string, onLate?: (value: T) => void): Promise<T> {
    const onUnavailable = this.engine.redis.isCluster ? () => refreshSlotsSoon(this.engine.redis) : undefined;
    const readOnlyIsFinal = writesToFixedServer(this.engine.redis);
    const describe = { key: this.name, name: what, onUnavailable, readOnlyIsFinal };
    return bounded(operation, this.engine.operationTimeout, describe, onLate);
  }

  private async acquire(options: AcquireOptions, defaultWaitTime?: number): Promise<LockHandle | { ttl: number }> {
    options = checkAcquireOptions(this.name, options, defaultWaitTime);
    const owner = this.ownerForAcquire(options.owner);
    const leaseTime = options.leaseTime ?? this.defaultLeaseTime;
    const watched = leaseTime === undefined;
    const leaseMs = leaseTime ?? this.engine.watchdogTimeout;
    const behaviour = this.waitBehaviour(owner);
    const { label } = options;
    // A release of this owner's hold still being retried must land first: sent after a new grant,
    // a repeat of it could release that grant.
    const settling = this.engine.registry.settled(this.keys.lock, owner);
    if (settling) await settling;
    /** The last attempt's reply never came: it may hold the lock (see grantOfUnknownAttempt). */
    let unknown: { holder: string; sentAt: number; holdId: string } | undefined;
    let refusedBefore = false;
    /** The connection epoch the last attempt was sent in (see ReplicaSync.epoch). */
    let grantedIn = 0;
    const startedAt = monotonicNow();
    try {
      const outcome = await acquireLoop<Taken>({
        key: this.name,
        waiters: this.engine.waiters,
        waitTime: options.waitTime,
        signal: options.signal,
        operationTimeout: this.engine.operationTimeout,
        connectionGone: () => closedForGood(this.engine.redis),
        expectGrant: this.turns?.expectsGrant(),
        ...behaviour,
        channel: behaviour.channel ?? this.keys.channel,
        attempt: async (payload, othersWaiting) => {
          grantedIn = this.engine.replicaSync.epoch;
          if (unknown) {
            const { holder, sentAt, holdId } = unknown;
            const grant = await this.bounded(this.grantOfUnknownAttempt(holder, holdId), 'lock');
            unknown = undefined;
            if (grant) {
              const hold = { leaseMs, watched, sentAt, label, holdId };
              return { acquired: true, value: { held: this.recordHold(holder, grant, hold), holdId } };
            }
          }
          this.turns?.attempting();
          const holder = this.holderFor(owner);
          const holdId = this.engine.newHoldId();
          const sentAt = monotonicNow();
          let result: Attempt<Grant>;
          try {
            const waiting = options.waitTime === 0 ? undefined : { othersWaiting, refusedBefore };
            const request = { owner, leaseMs, holder, payload, waiting, holdId };
            result = await this.bounded(this.attempt(request), 'lock');
          } catch (error) {
            if (error instanceof RedisUnavailableError) {
              unknown = { holder, sentAt, holdId };
            }
            throw error;
          }
          if (!result.acquired) {
            if (!refusedBefore && options.waitTime !== 0) {
              this.engine.lockEvent('waiting', () => ({ name: this.name, kind: this.kind, owner, label }));
            }
            refusedBefore = true;
            return result;
          }
          const { value } = result;
          const held = this.recordHold(value.holder ?? holder, value, { leaseMs, watched, sentAt, label, holdId });
          return { acquired: true, value: { held, holdId } };
        },
      });
      if (outcome.acquired) {
        const { held, holdId } = outcome.value;
        const handle = new LockHandle(held, holdId);
        const syncing = this.syncReplicas(handle, grantedIn);
        if (syncing && (await syncing) === 'unverified' && !(await this.survivedFailover(held, holdId))) {
          // The grant went down with the master that made it: wait for the lock again, for what is
          // left of waitTime, on the master that serves it now.
          const { waitTime } = options;
          const left = waitTime === undefined ? undefined : Math.max(0, waitTime - (monotonicNow() - startedAt));
          return await this.acquire({ ...options, waitTime: left }, defaultWaitTime);
        }
        this.engine.lockEvent('acquired', () => ({
          name: this.name,
          kind: this.kind,
          owner: handle.owner,
          label,
          fencingToken: handle.fencingToken,
          waitedMs: monotonicNow() - startedAt,
          reentered: handle.holdCount > 1,
        }));
        return handle;
      }
      await this.abandonWait(owner, behaviour.waiterId, options.waitTime !== 0);
      this.engine.lockEvent('timedOut', () => ({
        name: this.name,
        kind: this.kind,
        owner,
        label,
        waitedMs: monotonicNow() - startedAt,
      }));
      return { ttl: outcome.ttl };
    } catch (error) {
      if (unknown) this.undoInBackground(unknown.holder, leaseMs, unknown.holdId);
      await this.abandonWait(owner, behaviour.waiterId, options.waitTime !== 0).catch(() => undefined);
      throw error;
    }
  }

  /** Sets `held`'s lease in Redis to `leaseMs` from now (extend); true when the hold was there. */
  private async sendRenewal(held: HeldLock, leaseMs: number): Promise<boolean> {
    const [renewed] = await RENEW_MANY.run(this.engine.redis, held.renewalKeys, [
      this.engine.idleKeyTtl,
      held.renewal,
      leaseMs,
      held.owner,
    ]);
    return renewed === 1;
  }

  private recordHold(holder: string, grant: Grant, hold: HoldFacts): HeldLock {
    if (!grant.reentered) this.turns?.granted();
    // Written out field by field, in one order: a spread of holds of different shapes sends V8 off its
    // fast path (map transitions at every grant, in a profile of a hot-key loop).
    return this.engine.registry.record({
      name: this.name,
      key: this.keys.lock,
      owner: holder,
      holdId: hold.holdId,
      leaseMs: hold.leaseMs,
      watched: hold.watched,
      fencingToken: grant.fencingToken,
      renewal: this.renewal,
      renewalKeys: this.renewalKeys,
      ops: (this.holdOps ??= {
        release: (lock, holdId) => this.release(lock, holdId),
        extend: (lock, leaseTime) => this.extend(lock, leaseTime),
      }),
      sentAt: hold.sentAt,
      label: hold.label,
      reentered: grant.reentered,
    });
  }

  /** How a hold of this lock is released and extended (made on the first grant). */
  private holdOps?: HoldOps;

  /**
   * The caller gave up (an error) after an attempt whose reply never came: if Redis granted it, nobody
   * will use or renew that hold, so take it back, retrying through the outage until the lease is over.
   */
  private undoInBackground(holder: string, leaseMs: number, holdId: string): void {
    // Nothing to undo once the lease is over.
    this.sendInBackground(holder, leaseMs, 'undo unanswered attempt', () =>
      this.undoUnknownAttempt(holder, leaseMs, holdId),
    );
  }

  /**
   * Sends `send` (an idempotent release or undo of `holder`'s hold) until it lands or the lease is
   * certainly over, retrying while Redis cannot be reached; the same owner's next grant waits for it.
   * `onGiveUp` hears why it stopped without landing.
   */
  private sendInBackground(
    holder: string,
    leaseMs: number,
    name: string,
    send: () => Promise<unknown>,
    onGiveUp: (error: Error) => void = () => undefined,
  ): void {
    const { redis, operationTimeout, registry } = this.engine;
    const until = monotonicNow() + leaseMs + operationTimeout;
    const sent = retryWhileUnreachable(send, { redis, operationTimeout, until, key: this.name, name }).then(
      () => undefined,
      onGiveUp,
    );
    registry.inFlightFor(this.keys.lock, holder, sent);
  }

  /** Replica sync (the client's setting): after a first acquisition, until replicas have it. */
  private syncReplicas(handle: LockHandle, grantedIn: number): Promise<SyncVerdict> | undefined {
    if (handle.holdCount > 1) return undefined;
    return this.engine.replicaSync.afterGrant(this.name, this.keys.lock, grantedIn, () => handle.release());
  }

  /**
   * After a grant whose replica sync was cut off (its master stopped answering): whether the master
   * serving the key now, once it can be reached, has the hold. If not, the record is dropped (there
   * is nothing of ours to release). Redis unreachable for that long: the record is dropped,
   * the hold taken back in the background should it be there after all, and RedisUnavailableError.
   */
  private async survivedFailover(held: HeldLock, holdId: string): Promise<boolean> {
    const { redis, operationTimeout } = this.engine;
    const until = monotonicNow() + FAILOVER_CHECK_TIMEOUTS * operationTimeout;
    const check = () => this.grantOfUnknownAttempt(held.owner, holdId);
    try {
      if (await retryWhileUnreachable(check, { redis, operationTimeout, until, key: this.name, name: 'lock' })) {
        return true;
      }
    } catch (error) {
      held.forget();
      this.undoInBackground(held.owner, held.leaseMs, holdId);
      throw error;
    }
    held.forget();
    return false;
  }

  /**
   * Releases one hold recorded by this client (`held.release()`). If Redis cannot take it (see
   * isOutage), sends it again (it is idempotent) until it lands or the lease has certainly ended, so a
   * failover never leaves the lock behind for a lease; resolves 'pending' if none landed within one
   * operationTimeout.
   */
  private async release(held: HeldLock, holdId?: string): Promise<ReleaseOutcome> {
    if (held.released) return 'released';
    const outcome = await this.releaseHold(held, holdId);
    this.engine.lockEvent('released', () => ({
      name: this.name,
      kind: this.kind,
      owner: held.owner,
      label: held.label,
      heldMs: monotonicNow() - held.grantedAt,
      outcome,
    }));
    return outcome;
  }

  private async releaseHold(held: HeldLock, which?: string): Promise<ReleaseOutcome> {
    const { final, holdId } = held.beginRelease(which);
    // A repeat is sent late: the turn is surely over by then.
    const send = (handOver: HandOver = 'pass') => this.releaseOnce(held.owner, held.leaseMs, holdId, handOver);
    const { turns } = this;
    const handOver = turns && final ? turns.handOverFor() : 'pass';
    const startedAt = monotonicNow();
    let raw: RawRelease;
    try {
      raw = await this.bounded(send(handOver), 'unlock');
    } catch (error) {
      if (!isOutage(error) || closedForGood(this.engine.redis)) {
        held.releaseFailed(final, holdId);
        throw error;
      }
      const retried = this.retryRelease(held, holdId, () => send(), final);
      // The first copy may have landed as 'kept', the lock reserved for this process's turn, which a
      // repeat (answered as that copy was) does not undo: pass it on once a copy lands.
      if (handOver === 'keep') void retried.then(() => this.passWakeUp());
      this.engine.registry.inFlightFor(held.key, held.owner, retried);
      // The caller waits for the repeats up to one operationTimeout in all: a reconnect (a failover's
      // switch, a revived connection) is over well within it, and then the answer is a final one.
      const result = await settledWithin(retried, startedAt + this.engine.operationTimeout - monotonicNow());
      if (result instanceof Error) throw result;
      return result ?? 'pending';
    }
    return this.settleRelease(held, holdId, raw, final, false, handOver);
  }

  private settleRelease(
    held: HeldLock,
    holdId: string,
    raw: RawRelease,
    final: boolean,
    repeated: boolean,
    handOver: HandOver = 'pass',
  ): ReleaseOutcome {
    if (raw === 'released' || raw === 'kept') {
      held.markReleased();
      this.noteReleased(held, holdId);
      this.turns?.released(handOver, raw);
      return 'released';
    }
    if (raw === 'decremented') {
      held.markDecremented(final);
      return 'decremented';
    }
    if (repeated && final) {
      // Gone: our earlier send landed before its reply was lost, or the lease ran out; either way no
      // hold of ours is left.
      held.markReleased();
      return monotonicNow() < held.expiresAt ? 'released' : 'expired';
    }
    if (final) this.turns?.released(handOver, raw); // the hold was gone: so is the turn
    if (held.lost) {
      held.forget(); // already reported
      return 'expired';
    }
    // It ran out before we released it: the work ran unprotected for a while; say so loudly.
    held.markLost(raw === 'not-owner' ? 'not-owner' : 'lease-expired');
    return 'expired';
  }

  /** Kept for a few seconds, to be sent again if a failover may have lost it (see RecentReleases). */
  private noteReleased(held: HeldLock, holdId: string): void {
    this.engine.recentReleases.note(this, held.key, held.owner, holdId, held.leaseMs);
  }

  /**
   * @internal Sends a release again after a failover (see RecentReleases): it names the hold it ends
   * (its id, or a simple lock's or semaphore's token), so it can never touch another hold.
   */
  async replayRelease(holder: string, holdId: string, leaseMs: number): Promise<void> {
    await this.releaseOnce(holder, leaseMs, holdId);
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
    const { logger, operationTimeout, redis } = this.engine;
    logger.warn(`Could not reach Redis to release lock "${this.name}"; retrying until it lands or the lease ends.`);
    try {
      await sleep(25);
      // The lease cannot outlast its last renewal's reply, which came within operationTimeout of the send.
      const until = held.expiresAt + operationTimeout;
      const raw = await retryWhileUnreachable(send, { redis, operationTimeout, until, key: this.name, name: 'unlock' });
      return this.settleRelease(held, holdId, raw, final, true);
    } catch (error) {
      held.forget(); // the lease is over (or Redis refused): nothing of ours is left to release
      logger.warn(`Gave up releasing lock "${this.name}": ${(error as Error).message}`);
      return error as Error;
    }
  }

  /** Extends the lease of a hold recorded by this client (`held.extend()`). */
  private async extend(held: HeldLock, leaseTime?: number): Promise<void> {
    leaseTime = checkDuration(this.name, 'leaseTime', leaseTime, LEASE_RULE);
    if (held.lost) throw new LockLostError(this.name, held.owner, 'lease-expired');
    const leaseMs = leaseTime ?? held.leaseMs;
    const sentAt = monotonicNow();
    const renewed = await this.bounded(this.sendRenewal(held, leaseMs), 'extend');
    if (!renewed) {
      held.markLost('not-owner');
      throw new LockLostError(this.name, held.owner, 'not-owner');
    }
    held.leaseSet(sentAt, leaseMs);
    if (!held.watched) {
      held.leaseMs = leaseMs;
      held.armExpiry();
    }
  }
}
