import { randomUUID } from 'node:crypto';
import type { Attempt } from '../waiting/acquire-loop';
import type { EngineContext } from '../client/engine-context';
import { LockUpgradeError } from '../errors';
import type { RenewalKind } from '../holds/held-lock';
import { lockKeys, readWriteKeys, type LockKeys, type ReadWriteKeys } from '../redis/keys';
import {
  attemptOutcome,
  LockBase,
  type Grant,
  type RawRelease,
  type WaitBehaviour,
  type AttemptRequest,
} from './lock-base';
import type { LockKindName } from '../client/lock-events';
import type { OwnerScope } from '../holds/owner-scope';
import { claimedGrant, releaseCallOf } from '../holds/hold-id-calls';
import type { HandOver } from '../turns/process-turns';
import { checkDuration, TIMEOUT_RULE } from '../util/validation';
import {
  CLAIM_ATTEMPT,
  READ_CLAIM_ATTEMPT,
  READ_HOLD_COUNT,
  READ_LOCK,
  READ_PTTL,
  READ_UNLOCK,
  READ_WRITE_FORCE_UNLOCK,
  WRITE_ABANDON,
  WRITE_LOCK,
  WRITE_UNLOCK,
} from '../scripts/catalog';

export interface ReadWriteLockOptions {
  /**
   * A waiting writer holds back new readers through an intent it refreshes every third of this
   * (each retry); an intent not refreshed for this long (its process died) lapses and the readers
   * it held back go on. Default 5000 ms.
   */
  writerIntentTimeout?: number;
}

export const READ_WRITE_LOCK_DEFAULTS = { writerIntentTimeout: 5_000 } as const;

/**
 * Redisson's RReadWriteLock: many readers or one writer. Both sides are re-entrant per owner scope,
 * renewed by the watchdog while held, and woken by pub/sub. The writer may also read (and keeps
 * reading after releasing the write lock: a downgrade); a reader asking for the write lock gets a
 * LockUpgradeError at once. Every read hold expires on its own lease, so a dead reader never keeps
 * the lock read-locked while living readers renew theirs. A waiting writer stops new readers (readers
 * already holding may re-enter), so a stream of readers cannot starve it. Each hold of either side has
 * an id of its own, as the reentrant lock's do (lua/include/hold-ids.lua): a release names the hold it
 * ends and a repeated command is recognised by its id, never by a count this client remembers.
 * @example
 * const rw = locks.getReadWriteLock(`catalog:${id}`);
 * const item = await rw.readLock().withLock(() => catalog.get(id));
 * await rw.writeLock().withLock(({ fencingToken }) => catalog.put(id, next, { fencingToken }));
 */
export class ReadWriteLock {
  readonly keys: ReadWriteKeys;
  private readonly reader: ReadLock;
  private readonly writer: WriteLock;

  constructor(engine: EngineContext, name: string, options: ReadWriteLockOptions = {}) {
    this.reader = new ReadLock(engine, name);
    this.writer = new WriteLock(engine, name, options);
    this.keys = this.reader.rw;
  }

  get name(): string {
    return this.reader.name;
  }

  /** The shared side: held by any number of owners at once, never together with another owner's write. */
  readLock(): ReadLock {
    return this.reader;
  }

  /** The exclusive side: one owner, no reader but that owner itself. Grants carry fencing tokens. */
  writeLock(): WriteLock {
    return this.writer;
  }
}

/** The keys LockBase works with, for one side: its hold, the fence, the channel its waiters hear. */
function sideKeys(side: 'read' | 'write') {
  return (prefix: string, name: string): LockKeys => {
    const rw = readWriteKeys(prefix, name);
    // The plain lock's waiting / queue keys stay unused: both sides wait in their own way.
    return side === 'read'
      ? { ...lockKeys(prefix, name), lock: rw.readers, fence: rw.fence, channel: rw.readChannel }
      : { ...lockKeys(prefix, name), lock: rw.write, fence: rw.fence, channel: rw.writeChannel };
  };
}

/** What both sides share: the read-write keys, holds recorded by id, and the hold count query. */
abstract class ReadWriteSide extends LockBase {
  readonly rw: ReadWriteKeys;

  constructor(engine: EngineContext, name: string, side: 'read' | 'write') {
    super(engine, name, sideKeys(side));
    this.rw = readWriteKeys(engine.keyPrefix, name);
  }

  /**
   * Releases this side's hold `holdId`; without one (an unlock by owner of a hold taken elsewhere), any
   * hold of `owner` on this side, under the call's id `callId`. Both sides' scripts take the same arguments.
   */
  protected releaseOnce(
    owner: string,
    leaseMs: number,
    holdId?: string,
    _handOver?: HandOver,
    callId?: string,
  ): Promise<RawRelease> {
    const script = this.kind === 'read' ? READ_UNLOCK : WRITE_UNLOCK;
    return script.run(this.engine.redis, this.rw, {
      owner,
      ...releaseCallOf(holdId, this.engine.newHoldId, callId),
      leaseMs,
      publish: this.engine.publishCommand,
    });
  }

  protected forceSide(side: 'read' | 'write'): Promise<boolean> {
    const { redis, publishCommand } = this.engine;
    const force = READ_WRITE_FORCE_UNLOCK.run(redis, this.rw, { side, publish: publishCommand, callId: randomUUID() });
    return this.bounded(force, 'forceUnlock');
  }

  /** How many holds of this side the current scope's owner (or `owner`) has; 0 when none. */
  abstract getHoldCount(owner?: string): Promise<number>;
}

/**
 * The read side of a ReadWriteLock (get it with `readLock()`). Its fencing token is the one of the
 * last write granted before it (0 if none): the version of the data it reads.
 */
export class ReadLock extends ReadWriteSide {
  readonly kind: LockKindName = 'read';
  protected readonly renewal: RenewalKind = 'read';

  constructor(engine: EngineContext, name: string) {
    super(engine, name, 'read');
  }

  /** A writer reads inside its own critical section too: its scope re-enters the read side. */
  override heldInScope(scope: OwnerScope): boolean {
    const writer = this.engine.registry.get(this.rw.write, `${this.engine.clientId}:${scope.id}`);
    return (writer !== undefined && !writer.lost) || super.heldInScope(scope);
  }

  protected override get renewalKeys(): readonly string[] {
    return (this.readKeys ??= [this.rw.readers, this.rw.readCounts, this.rw.readGrants, this.rw.fence]);
  }

  private readKeys?: readonly string[];

  protected async attempt({ owner, leaseMs, holdId }: AttemptRequest): Promise<Attempt<Grant>> {
    const [status, value] = await READ_LOCK.run(this.engine.redis, this.rw, {
      leaseMs,
      owner,
      holdId,
      idleKeyTtl: this.engine.idleKeyTtl,
    });
    return attemptOutcome(status, value);
  }

  /** A release that may let readers in lets them all in: every waiting reader of a process wakes. */
  protected override waitBehaviour(): WaitBehaviour {
    return { channel: this.rw.readChannel, broadcast: true };
  }

  /** Readers register nothing while they wait: nothing to undo. */
  protected override async abandonWait(): Promise<void> {}

  /** Claims the unanswered attempt's read hold if it landed and is live, or cancels the attempt for good. */
  protected async grantOfUnknownAttempt(holder: string, holdId: string): Promise<Grant | undefined> {
    return claimedGrant(await READ_CLAIM_ATTEMPT.run(this.engine.redis, this.rw, { holdId, owner: holder }));
  }

  /** How many read holds the current scope's owner (or `owner`) has; 0 when none, or once its hold ran out. */
  async getHoldCount(owner = this.scopeOwner()): Promise<number> {
    if (owner === undefined) return 0;
    return this.bounded(READ_HOLD_COUNT.run(this.engine.redis, this.rw, { owner }), 'getHoldCount');
  }

  /** Whether any read hold is live. */
  override async isLocked(): Promise<boolean> {
    return (await this.remainTimeToLive()) > 0;
  }

  /** What is left of the longest live read hold, in ms; -2 when none is live. */
  override remainTimeToLive(): Promise<number> {
    return this.bounded(READ_PTTL.run(this.engine.redis, this.rw, {}), 'remainTimeToLive');
  }

  /** Deletes every read hold, whoever holds them, and wakes the waiting writers. True when read-locked. */
  override forceUnlock(): Promise<boolean> {
    return this.forceSide('read');
  }
}

/**
 * The write side of a ReadWriteLock (get it with `writeLock()`). A writer that waits registers an
 * intent that holds back new readers until it gets the lock or gives up.
 */
export class WriteLock extends ReadWriteSide {
  readonly kind: LockKindName = 'write';
  protected readonly renewal: RenewalKind = 'held';
  private readonly writerIntentTimeout: number;

  constructor(engine: EngineContext, name: string, options: ReadWriteLockOptions = {}) {
    super(engine, name, 'write');
    this.writerIntentTimeout =
      checkDuration(name, 'writerIntentTimeout', options.writerIntentTimeout, TIMEOUT_RULE) ??
      READ_WRITE_LOCK_DEFAULTS.writerIntentTimeout;
  }

  protected override get renewalKeys(): readonly string[] {
    return (this.writeKeys ??= [this.rw.write, this.rw.writeGrants, this.rw.fence]);
  }

  private writeKeys?: readonly string[];

  protected async attempt({ owner, leaseMs, waiting, holdId }: AttemptRequest): Promise<Attempt<Grant>> {
    const intent = waiting ? this.writerIntentTimeout : 0;
    const args = { leaseMs, owner, intentMs: intent, holdId, idleKeyTtl: this.engine.idleKeyTtl };
    const [status, value] = await WRITE_LOCK.run(this.engine.redis, this.rw, args);
    if (status === 'holds-read') throw new LockUpgradeError(this.name, owner);
    return attemptOutcome(status, value);
  }

  /**
   * Claims the unanswered attempt's write hold if it landed and is held, or cancels the attempt for
   * good: the reentrant lock's script, on the write side's hash, hold ids and fencing counter.
   */
  protected async grantOfUnknownAttempt(holder: string, holdId: string): Promise<Grant | undefined> {
    const { write: lock, writeGrants: grants, fence } = this.rw;
    return claimedGrant(await CLAIM_ATTEMPT.run(this.engine.redis, { lock, grants, fence }, { holdId, owner: holder }));
  }

  /** One waiter per process retries on a release; every waiter retries every third of the intent timeout, refreshing its intent. */
  protected override waitBehaviour(): WaitBehaviour {
    return { channel: this.rw.writeChannel, maxSleep: Math.max(1, Math.floor(this.writerIntentTimeout / 3)) };
  }

  /** Withdraws the intent, waking the readers it held back (best effort: unwithdrawn, it lapses by itself). */
  protected override async abandonWait(owner: string, _waiterId: string | undefined, waited: boolean): Promise<void> {
    if (!waited) return;
    const abandon = WRITE_ABANDON.run(this.engine.redis, this.rw, { owner, publish: this.engine.publishCommand });
    await this.bounded(abandon, 'abandon wait').catch(() => undefined);
  }

  /** How many write holds the current scope's owner (or `owner`) has; 0 when none. */
  getHoldCount(owner = this.scopeOwner()): Promise<number> {
    return this.holdCount(this.rw.write, owner);
  }

  /** Deletes the write hold whoever holds it and wakes the waiters. True when write-locked. */
  override forceUnlock(): Promise<boolean> {
    return this.forceSide('write');
  }
}
