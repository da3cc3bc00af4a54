import { randomUUID } from 'node:crypto';
import { ReadWriteSide } from './read-write-side';
import type { Attempt } from '../waiting/acquire-loop';
import type { EngineContext } from '../client/engine-context';
import { LockUpgradeError } from '../errors';
import type { RenewalKind } from '../holds/held-lock';
import { attemptOutcome, type Grant, type WaitBehaviour, type AttemptRequest } from '../lock/lock-base';
import type { LockKindName } from '../client/lock-events';
import { claimedGrant } from '../holds/hold-id-calls';
import { checkDuration, TIMEOUT_RULE } from '../util/validation';
import { CLAIM_ATTEMPT, WRITE_ABANDON, WRITE_LOCK } from '../scripts/catalog';
import type { LockHandle } from '../holds/lock-handle';
import type { LockCall } from '../lock/lock-call';
import type { AcquireOptions } from '../lock/acquire-options';
import { currentScope, ownerOfScope, type OwnerScope } from '../holds/owner-scope';

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
 * The wait id of each `lock()` or `tryLock()` call, for its attempts and its abandon (see waitBehaviour):
 * intents are kept per wait, never per owner, since one owner may wait twice at once, and a late copy
 * of an abandon (re-sent after a reconnect) must not withdraw the intent of the owner's next wait.
 */
const waitIdsOfCalls = new WeakMap<LockCall, string>();

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

  override lock(options?: AcquireOptions): Promise<LockHandle> {
    const upgrade = this.upgradeInSection(options);
    if (upgrade) return Promise.reject(upgrade);
    return super.lock(options);
  }

  override tryLock(options?: AcquireOptions): Promise<LockHandle | null> {
    const upgrade = this.upgradeInSection(options);
    if (upgrade) return Promise.reject(upgrade);
    return super.tryLock(options);
  }

  /**
   * A write section opened inside a read section of this lock runs under an owner of its own (nested in
   * the reader's scope), which the script cannot tell from a stranger: it would wait, and hold other
   * readers back, for a read hold its own caller keeps until it returns. That is an upgrade, refused at
   * once as the script refuses the reader's own owner. Unless the section re-enters a write hold.
   */
  private upgradeInSection(options?: AcquireOptions): LockUpgradeError | undefined {
    // `?.`: options that are not an object reach lock(), which refuses them with a LockOptionsError.
    if ((options as AcquireOptions | null | undefined)?.owner !== undefined) return undefined;
    const scope = currentScope();
    if (!scope?.parent) return undefined; // the scope's own owner: the script answers 'holds-read'
    const owner = this.scopeOwner();
    const writer = owner === undefined ? undefined : this.findHeld(owner);
    if (owner === undefined || (writer !== undefined && !writer.lost)) return undefined;
    const { registry, clientId } = this.engine;
    for (let s: OwnerScope | undefined = scope; s; s = s.parent) {
      const reader = registry.get(this.rw.readers, ownerOfScope(s, clientId));
      if (reader !== undefined && !reader.lost) return new LockUpgradeError(this.name, reader.owner);
    }
    return undefined;
  }

  protected async attempt({ owner, leaseMs, waiting, holdId, lockCall }: AttemptRequest): Promise<Attempt<Grant>> {
    const intent = waiting ? this.writerIntentTimeout : 0;
    // Every attempt is made for its lock() or tryLock() call, whose wait id waitBehaviour made.
    const waitId = waitIdsOfCalls.get(lockCall) ?? randomUUID();
    const args = { leaseMs, owner, intentMs: intent, holdId, idleKeyTtl: this.engine.idleKeyTtl, waitId };
    const [status, value] = await WRITE_LOCK.run(this.engine.redis, this.rw, args);
    if (status === 'holds-read') throw new LockUpgradeError(this.name, owner);
    return attemptOutcome(status, value);
  }

  /**
   * Claims the unanswered attempt's write hold if it landed and is held, or cancels the attempt for
   * good: the reentrant lock's script, on the write side's hash, hold ids and fencing counter.
   */
  protected async grantOfUnknownAttempt(holder: string, holdId: string, leaseMs: number): Promise<Grant | undefined> {
    const { write: lock, writeGrants: grants, fence } = this.rw;
    const args = { holdId, owner: holder, leaseMs, idleKeyTtl: this.engine.idleKeyTtl };
    return claimedGrant(await CLAIM_ATTEMPT.run(this.engine.redis, { lock, grants, fence }, args));
  }

  /**
   * Asked at the start of each lock() or tryLock() call, which gets its wait id here, and again when the
   * call waits anew (its grant lost in a failover): the same wait, under the same id, so that its intent
   * already on the master serving the lock now goes with its grant or its abandon, not up to
   * writerIntentTimeout later. One waiter per process retries on a release; every waiter retries every
   * third of the intent timeout, refreshing its intent.
   */
  protected override waitBehaviour(_owner: string, lockCall: LockCall): WaitBehaviour {
    if (!waitIdsOfCalls.has(lockCall)) waitIdsOfCalls.set(lockCall, randomUUID());
    return { channel: this.rw.writeChannel, maxSleep: Math.max(1, Math.floor(this.writerIntentTimeout / 3)) };
  }

  /** Withdraws this wait's intent, waking the readers it held back (best effort: unwithdrawn, it lapses by itself). */
  protected override async abandonWait(
    owner: string,
    _waiterId: string | undefined,
    waited: boolean,
    lockCall: LockCall,
  ): Promise<void> {
    const waitId = waitIdsOfCalls.get(lockCall);
    if (!waited || waitId === undefined) return;
    const args = { owner, publish: this.engine.publishCommand, waitId };
    const abandon = WRITE_ABANDON.run(this.engine.redis, this.rw, args);
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
