import type { EngineContext } from '../client/engine-context';
import type { ReadWriteKeys } from '../redis/keys';
import { WriteLock, type ReadWriteLockOptions } from './write-lock';
import { ReadLock } from './read-lock';

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
