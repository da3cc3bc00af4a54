import type { Attempt } from './acquire-loop';
import type { EngineContext } from './engine-context';
import { LockUpgradeError } from './errors';
import type { RenewalKind } from './held-lock';
import { lockKeys, readWriteKeys, type LockKeys, type ReadWriteKeys } from './keys';
import {
  LockBase,
  otherKindAsNull,
  type Grant,
  type RawRelease,
  type WaitBehaviour,
  type WaitingAttempt,
} from './lock-base';
import type { LockKindName } from './lock-events';
import { checkDuration, TIMEOUT_RULE } from './validation';
import { runScript } from './scripts';

const RELEASE_RESULTS: Record<number, RawRelease> = {
  1: 'released',
  0: 'decremented',
  [-1]: 'not-locked',
  [-2]: 'not-owner',
};

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
 * already holding may re-enter), so a stream of readers cannot starve it.
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

/** What both sides share: the read-write keys and the hold count query. */
abstract class ReadWriteSide extends LockBase {
  readonly rw: ReadWriteKeys;

  constructor(engine: EngineContext, name: string, side: 'read' | 'write') {
    super(engine, name, sideKeys(side));
    this.rw = readWriteKeys(engine.keyPrefix, name);
  }

  /** The keys both acquisition scripts take, in their order. */
  protected get attemptKeys(): string[] {
    const { write, readers, readCounts, writers, fence } = this.rw;
    return [write, readers, readCounts, writers, fence];
  }

  protected forceSide(side: 'read' | 'write'): Promise<boolean> {
    const { write, readers, readCounts, readChannel, writeChannel } = this.rw;
    return this.bounded(
      runScript<number>(
        this.engine.redis,
        'rw-force-unlock',
        [write, readers, readCounts, readChannel, writeChannel],
        [side, this.engine.publishCommand],
      ),
      'forceUnlock',
    ).then((deleted) => deleted === 1);
  }

  /** How many holds of this side the current scope's owner (or `owner`) has; 0 when none. */
  async getHoldCount(owner = this.scopeOwner()): Promise<number> {
    if (owner === undefined) return 0;
    const key = this.kind === 'read' ? this.rw.readCounts : this.rw.write;
    const count = await this.bounded(this.engine.redis.hget(key, owner), 'getHoldCount');
    return count === null ? 0 : Number(count);
  }
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

  protected override get renewalKeys(): readonly string[] {
    return [this.rw.readers, this.rw.readCounts];
  }

  protected async attempt(owner: string, leaseMs: number): Promise<Attempt<Grant>> {
    const [status, value] = await runScript<[number, number]>(this.engine.redis, 'rw-read-lock', this.attemptKeys, [
      leaseMs,
      owner,
    ]);
    if (status === 2) return { acquired: false, ttl: value };
    return { acquired: true, value: { fencingToken: value, reentered: status === 1 } };
  }

  protected async releaseOnce(owner: string, leaseMs: number, expectedHolds?: number): Promise<RawRelease> {
    const { write, readers, readCounts, writeChannel } = this.rw;
    const result = await runScript<number>(
      this.engine.redis,
      'rw-read-unlock',
      [write, readers, readCounts, writeChannel],
      [owner, leaseMs, this.engine.publishCommand, expectedHolds ?? ''],
    );
    return RELEASE_RESULTS[result];
  }

  /** A release that may let readers in lets them all in: every waiting reader of a process wakes. */
  protected override waitBehaviour(): WaitBehaviour {
    return { channel: this.rw.readChannel, broadcast: true };
  }

  /** Readers register nothing while they wait: nothing to undo. */
  protected override async abandonWait(): Promise<void> {}

  protected override async grantOfUnknownAttempt(holder: string, known: number): Promise<Grant | undefined> {
    const [count, fence] = await Promise.all([
      this.engine.redis.hget(this.rw.readCounts, holder).catch(otherKindAsNull),
      this.engine.redis.get(this.rw.fence),
    ]);
    if (count === null || Number(count) <= known) return undefined;
    return { fencingToken: Number(fence ?? 0), reentered: known > 0 };
  }

  /** Whether any read hold is live. */
  override async isLocked(): Promise<boolean> {
    return (await this.remainTimeToLive()) > 0;
  }

  /** What is left of the longest live read hold, in ms; -2 when none is live. */
  override remainTimeToLive(): Promise<number> {
    return this.bounded(
      runScript<number>(this.engine.redis, 'rw-read-pttl', [this.rw.readers], []),
      'remainTimeToLive',
    );
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
  protected readonly renewal: RenewalKind = 'hash';
  private readonly writerIntentTimeout: number;

  constructor(engine: EngineContext, name: string, options: ReadWriteLockOptions = {}) {
    super(engine, name, 'write');
    this.writerIntentTimeout =
      checkDuration(name, 'writerIntentTimeout', options.writerIntentTimeout, TIMEOUT_RULE) ??
      READ_WRITE_LOCK_DEFAULTS.writerIntentTimeout;
  }

  protected async attempt(
    owner: string,
    leaseMs: number,
    _payload?: string,
    _holder?: string,
    waiting?: WaitingAttempt,
  ): Promise<Attempt<Grant>> {
    const intent = waiting ? this.writerIntentTimeout : 0;
    const [status, value] = await runScript<[number, number]>(this.engine.redis, 'rw-write-lock', this.attemptKeys, [
      leaseMs,
      owner,
      intent,
    ]);
    if (status === 3) throw new LockUpgradeError(this.name, owner);
    if (status === 2) return { acquired: false, ttl: value };
    return { acquired: true, value: { fencingToken: value, reentered: status === 1 } };
  }

  protected async releaseOnce(owner: string, leaseMs: number, expectedHolds?: number): Promise<RawRelease> {
    const { write, readers, readChannel, writeChannel } = this.rw;
    const result = await runScript<number>(
      this.engine.redis,
      'rw-write-unlock',
      [write, readers, readChannel, writeChannel],
      [owner, leaseMs, this.engine.publishCommand, expectedHolds ?? ''],
    );
    return RELEASE_RESULTS[result];
  }

  /** One waiter per process retries on a release; every waiter retries every third of the intent timeout, refreshing its intent. */
  protected override waitBehaviour(): WaitBehaviour {
    return { channel: this.rw.writeChannel, maxSleep: Math.max(1, Math.floor(this.writerIntentTimeout / 3)) };
  }

  /** Withdraws the intent, waking the readers it held back (best effort: unwithdrawn, it lapses by itself). */
  protected override async abandonWait(owner: string, _waiterId: string | undefined, waited: boolean): Promise<void> {
    if (!waited) return;
    const { write, writers, readChannel } = this.rw;
    await this.bounded(
      runScript<number>(
        this.engine.redis,
        'rw-write-abandon',
        [write, writers, readChannel],
        [owner, this.engine.publishCommand],
      ),
      'abandon wait',
    ).catch(() => undefined);
  }

  /** Deletes the write hold whoever holds it and wakes the waiters. True when write-locked. */
  override forceUnlock(): Promise<boolean> {
    return this.forceSide('write');
  }
}
