import { randomUUID } from 'node:crypto';
import type { Attempt } from '../waiting/acquire-loop';
import { bounded, type BoundedOperation } from '../redis/bounded';
import { writesToFixedServer } from '../redis/fixed-server';
import type { EngineContext } from '../client/engine-context';
import { LockAcquireTimeoutError, LockNotHeldError } from '../errors';
import type { HeldLock, HoldOps, RenewalKind } from '../holds/held-lock';
import { lockKeys, type LockKeys } from '../redis/keys';
import { LockHandle, type LockContext, type ReleaseOutcome } from '../holds/lock-handle';
import { assertAcquireOptions, type AcquireOptions } from './acquire-options';
import { assertLockName, assertOptionsObject } from '../util/validation';
import { currentScope, nestedSection, ownerOfScope, runAsCriticalSection, type OwnerScope } from '../holds/owner-scope';
import { FORCE_UNLOCK, HOLD_STATE, type HoldKind, type HoldStateReply } from '../scripts/catalog';
import { passWakeUp } from '../waiting/pass-wake-up';
import { refreshSlotsSoon } from '../redis/slot-refresh';
import type { LockKindName } from '../client/lock-events';
import type { LockLogger } from '../util/logger';
import type { RedisClient } from '../redis/redis-client';
import { withLock } from './with-lock';
import type { ReleaseReplayer } from '../holds/recent-releases';
import type { HandOver } from '../turns/process-turns';
import { LockTurns } from '../turns/lock-turns';
import { acquireLock } from './lock-acquisition';
import { LockRelease, sendUntilAnswered } from './lock-release';
import { extendHold } from './lock-renewal';
import type { AttemptRequest, Grant, HoldFacts, LockSide, RawRelease, WaitBehaviour } from './lock-side';
import type { LockCall } from './lock-call';

export type { AttemptRequest, Grant, RawRelease, WaitBehaviour, WaitingAttempt } from './lock-side';
export type { LockCall } from './lock-call';
export { attemptOutcome, waitingFlag } from './attempt-replies';

/**
 * Waiters of a process that heard nothing for this long try once more: a wake-up goes to one process,
 * which may be frozen (or the message lost), and the lock must not sit free while the others sleep.
 */
export const QUIET_RECHECK_MS = 1_000;

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

  /**
   * What this lock's acquisitions and releases (LockAcquisition, LockRelease) ask of its kind: made once,
   * so the hot path allocates nothing for it.
   */
  private get side(): LockSide {
    return (this.ownSide ??= {
      name: this.name,
      kind: this.kind,
      keys: this.keys,
      engine: this.engine,
      replayer: this.releaseReplayer,
      turns: () => this.turns,
      bounded: (operation, what) => this.bounded(operation, what),
      holderFor: (owner) => this.holderFor(owner),
      retryAdoptsHold: this.retryAdoptsHold,
      // Outside any scope every acquisition gets its own owner, so unrelated callers never share a hold
      // (an id unique across processes and restarts, as a hold's is; cheaper than a UUID per acquisition).
      ownerFor: (explicit) => explicit ?? this.scopeOwner() ?? `${this.engine.clientId}:${this.engine.newHoldId()}`,
      defaultLeaseTime: () => this.defaultLeaseTime,
      waitBehaviour: (owner, lockCall) => this.waitBehaviour(owner, lockCall),
      abandonWait: (owner, waiterId, waited, lockCall) => this.abandonWait(owner, waiterId, waited, lockCall),
      attempt: (request) => this.attempt(request),
      grantOfUnknownAttempt: (holder, holdId, leaseMs) => this.grantOfUnknownAttempt(holder, holdId, leaseMs),
      releaseOnce: (owner, leaseMs, holdId, handOver) => this.releaseOnce(owner, leaseMs, holdId, handOver),
      passWakeUp: () => this.passWakeUp(),
      recordHold: (holder, grant, hold) => this.recordHold(holder, grant, hold),
      holdsInEpoch: (held) => this.holdsInEpoch(held),
    });
  }

  private ownSide?: LockSide;

  /**
   * What the client keeps for a few seconds after each release of this lock, to send it again after a
   * failover (see RecentReleases): the lock itself, or something smaller for a kind made per acquisition.
   */
  protected get releaseReplayer(): ReleaseReplayer {
    return this;
  }

  /** The releases of this lock's holds (see LockRelease). */
  private get releases(): LockRelease {
    return (this.ownReleases ??= new LockRelease(this.side));
  }

  private ownReleases?: LockRelease;

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

  /** See LockSide.retryAdoptsHold. */
  protected readonly retryAdoptsHold: boolean = false;

  /**
   * An attempt whose reply never came (the connection dropped, a failover) may have been granted.
   * Asked before the next attempt, by the attempt's own id (`holdId`, or a simple lock's or semaphore's
   * token `holder`): if it landed, that grant is ours (returned, with its fencing token); if not, a kind
   * that records holds by id cancels it for good, so that a copy still on its way takes nothing.
   */
  protected abstract grantOfUnknownAttempt(holder: string, holdId: string, leaseMs: number): Promise<Grant | undefined>;

  /**
   * The lease left on `holdKey`, `holder`'s hold in it (of `kind`; null when none or another kind
   * holds the name) and the fencing counter, read in one script call: on the master even through a
   * Cluster client that sends plain reads to replicas (see hold-state-2.lua).
   */
  protected readHold(holdKey: string, holder: string, kind: HoldKind): Promise<HoldStateReply> {
    return HOLD_STATE.run(this.engine.redis, { lock: holdKey, fence: this.keys.fence }, { holder, kind });
  }

  /** See LockSide.holdsInEpoch: the fencing counter moves only with a first grant, never while held. */
  private async holdsInEpoch(held: HeldLock): Promise<boolean> {
    // The owner's count: in the lock hash, or for a read hold in the read counts (see renew-many-n.lua).
    const counts = held.renewal === 'held' ? held.key : held.renewal === 'read' ? held.renewalKeys[1] : undefined;
    if (counts === undefined) return false;
    const [, count, fence] = await this.bounded(this.readHold(counts, held.owner, 'hash'), 'unlock');
    return count !== null && count !== '0' && Number(fence) === held.fencingToken;
  }

  /**
   * A wait that ended without the lock (`waited`: it was not a single attempt). The reentrant and
   * simple locks take this process out of the waiting registry once its last waiter gave up, passing
   * on a wake-up that may be on its way (in the background: the caller is not kept waiting for it).
   */
  protected async abandonWait(
    _owner: string,
    _waiterId: string | undefined,
    waited: boolean,
    _lockCall: LockCall,
  ): Promise<void> {
    if (waited && this.engine.waiters.memberCount(this.processChannel) === 0) void this.passWakeUp();
  }

  /**
   * Reentrant and simple locks: each waiting process listens on its own channel, and a release wakes
   * one of them (see lua/include/wake-one-process.lua), not every process that waits.
   */
  protected waitBehaviour(_owner: string, _lockCall: LockCall): WaitBehaviour {
    // The same for every acquisition of this lock: built once, off the hot path.
    return (this.processWaiting ??= {
      channel: this.processChannel,
      onUnheard: () => void this.passWakeUp(),
      quietRecheckMs: this.engine.quietRecheckMs,
      shareRetries: true,
    });
  }

  private processWaiting?: WaitBehaviour;

  /** The script that takes this process out of the waiting registry and wakes the next one if it can. */
  protected passScript(): Promise<unknown> {
    return passWakeUp(this.engine, this.keys);
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
    const outcome = await acquireLock(this.side, options);
    if (outcome instanceof LockHandle) return outcome;
    throw new LockAcquireTimeoutError(this.name, options.waitTime ?? 0, outcome.ttl > 0 ? outcome.ttl : undefined);
  }

  /** Acquires within `waitTime` (default 0: one attempt) or resolves `null`. */
  async tryLock(options: AcquireOptions = {}): Promise<LockHandle | null> {
    // Only undefined means "not given": null and other values are checked as the caller's.
    const outcome = await acquireLock(this.side, options, 0);
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
    // An explicit owner's section: a call from inside re-enters it (an unusable one is refused by lock()).
    const given = (options as WithLockOptions | null)?.owner;
    const owner = typeof given === 'string' && given !== '' ? given : undefined;
    const holds = (scope: OwnerScope) => this.heldInScope(scope);
    // Opened inside another section, this one is nested in it: a lock that section (or one around it)
    // holds re-enters from inside this one, under that section's owner (A, then B, then A again).
    const inherit = nestedSection;
    const section = () => withLock(() => this.lock(options), fn, report);
    return runAsCriticalSection(holds, section, { newScope, inherit, owner });
  }

  /**
   * @internal Whether `scope`'s owner holds this lock, as this client last knew it: a `withLock` inside
   * that scope re-enters it (see runAsCriticalSection).
   */
  heldInScope(scope: OwnerScope): boolean {
    return this.holderIn(scope) !== undefined;
  }

  /** Whether `scope`'s own owner holds this lock, as this client last knew it. */
  protected holdsAsScope(scope: OwnerScope): boolean {
    const held = this.findHeld(ownerOfScope(scope, this.engine.clientId));
    return held !== undefined && !held.lost;
  }

  /** The nearest scope of `scope` and its parents (see OwnerScope.parent) whose owner holds this lock. */
  private holderIn(scope: OwnerScope): OwnerScope | undefined {
    for (let s: OwnerScope | undefined = scope; s; s = s.parent) if (this.holdsAsScope(s)) return s;
    return undefined;
  }

  /** @internal The client's logger: a MultiLock reports a failed release through its first lock's. */
  get logger(): LockLogger {
    return this.engine.logger;
  }

  /** @internal The share of each lease its client gives up to clock drift (see leaseEnd): a MultiLock checks its lease against it. */
  get driftFactor(): number {
    return this.engine.registry.driftFactor;
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
    // Checked as lock()'s is: an empty or non-string owner would reach the script (BADARG, or a wrong owner).
    if (options.owner !== undefined) assertAcquireOptions(this.name, { owner: options.owner });
    const owner = options.owner ?? this.scopeOwner();
    if (owner === undefined) {
      throw new LockNotHeldError(this.name, '(no lock scope)');
    }
    const held = this.findHeld(owner);
    if (held) return this.releases.release(held);
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

  /** Sends a call that is safe to repeat until it has a final answer (see sendUntilAnswered). */
  protected sendOnce<T>(send: () => Promise<T>): Promise<T> {
    return sendUntilAnswered(this.side, send);
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

  /** The current scope's owner; in a scope with a parent, the owner of the nearest one that holds this lock. */
  protected scopeOwner(): string | undefined {
    const scope = currentScope();
    if (!scope) return undefined;
    const owner = scope.parent ? (this.holderIn(scope) ?? scope) : scope;
    return ownerOfScope(owner, this.engine.clientId);
  }

  protected bounded<T>(operation: Promise<T>, what: string, onLate?: (value: T) => void): Promise<T> {
    return bounded(operation, this.engine.operationTimeout, this.boundedAs(what), onLate);
  }

  /** How `bounded` names operation `what` of this lock: made once per name (every acquire and release asks). */
  private boundedAs(what: string): BoundedOperation {
    const known = (this.boundedOperations ??= new Map());
    let describe = known.get(what);
    if (describe === undefined) {
      const { redis } = this.engine;
      const onUnavailable = redis.isCluster ? () => refreshSlotsSoon(redis) : undefined;
      describe = { key: this.name, name: what, onUnavailable, readOnlyIsFinal: writesToFixedServer(redis) };
      known.set(what, describe);
    }
    return describe;
  }

  private boundedOperations?: Map<string, BoundedOperation>;

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
        release: (lock, holdId) => this.releases.release(lock, holdId),
        extend: (lock, leaseTime, onLanded) => extendHold(this.side, lock, leaseTime, true, onLanded),
      }),
      sentAt: hold.sentAt,
      firstLease: hold.firstLease,
      label: hold.label,
      reentered: grant.reentered,
    });
  }

  /** How a hold of this lock is released and extended (made on the first grant). */
  private holdOps?: HoldOps;

  /**
   * @internal Sends a release again after a failover (see RecentReleases): it names the hold it ends
   * (its id, or a simple lock's or semaphore's token), so it can never touch another hold.
   */
  async replayRelease(holder: string, holdId: string, leaseMs: number): Promise<void> {
    await this.releaseOnce(holder, leaseMs, holdId);
  }
}
