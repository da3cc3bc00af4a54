import { inspectReadWriteLock, inspectSemaphore } from '../engine/client/kind-inspections';
import { engineOf, type LockClient } from '../engine/client/lock-client';
import { RedisUnavailableError } from '../engine/errors';
import type { ScannedKind } from '../engine/redis/key-scan';
import { readWriteKeys, semaphoreKeys } from '../engine/redis/keys';
import { bounded } from '../engine/redis/bounded';
import { mastersOf } from '../engine/redis/key-scan';
import { lockFromInspection, lockFromReadWrite, lockFromSemaphore, type BoardKind, type BoardLock } from './board-lock';
import type { BoardSettings } from './board-options';
import type { BoardEvent } from './event-log';
import { STATS_BUCKET_MS, STATS_WINDOW_MS, type LabelRow } from './label-stats';
import { LockActivity } from './lock-activity';
import { RollingScan } from './rolling-scan';

/** Read-write lock readers, semaphore holds and waiters listed per lock; the totals are counted. */
const MOST_LISTED = 50;

/** What the page shows, as the state endpoint returns it (see docs/board.md). */
export interface BoardState {
  /** Epoch ms of the read. */
  at: number;
  prefix: string;
  /** How many masters were scanned (each master of a Cluster), never their addresses. */
  masters: number;
  cluster: boolean;
  locks: BoardLock[];
  /** Locks found by the scan (and this process's latest acquisitions), of which `locks` shows up to maxLocks. */
  namesKnown: number;
  /** Whole SCAN passes over every master since the board started. */
  scanPasses: number;
  scanPerRefresh: number;
  maxLocks: number;
  refreshMs: number;
  forceUnlock: boolean;
  events: BoardEvent[];
  labels: LabelRow[];
  statsWindowMs: number;
  statsBucketMs: number;
  /** Why Redis could not be read, in words without any address or credential. */
  error?: string;
}

/** A force-unlock the board refuses: the lock is not as the confirmation described it. */
export class BoardConflict extends Error {
  override readonly name = 'BoardConflict';
}

/**
 * The board's view of one LockClient: a snapshot read at most once per `refreshMs` however many pages
 * ask (they share it), each read bounded (`scanPerRefresh` keys scanned, `maxLocks` locks read), and
 * the force-unlock. Holds the client's event listeners until `close()`.
 */
export class LockBoard {
  readonly activity: LockActivity;
  private readonly scan: RollingScan;
  private latest?: { at: number; state: Promise<BoardState>; done: boolean };

  constructor(
    private readonly client: LockClient,
    private readonly settings: BoardSettings,
  ) {
    this.activity = new LockActivity(client, settings.maxEvents, settings.maxLabels);
    this.scan = new RollingScan(client.redis, client.keyPrefix);
  }

  close(): void {
    this.activity.close();
  }

  /** The latest snapshot, read again if it is older than `refreshMs` (one read at a time). */
  state(): Promise<BoardState> {
    const now = Date.now();
    // A read still running is shared too, however old: a slow Redis gets one read at a time.
    if (!this.latest || (this.latest.done && now - this.latest.at >= this.settings.refreshMs)) {
      const latest: { at: number; state: Promise<BoardState>; done: boolean } = {
        at: now,
        state: this.read(),
        done: false,
      };
      const done = () => void (latest.done = true);
      latest.state.then(done, done);
      this.latest = latest;
    }
    return this.latest.state;
  }

  /**
   * Force-unlocks `name` if `holder` (the one the confirmation named) still holds it; BoardConflict
   * otherwise, so nobody unlocks a holder they did not see. Recorded in the events.
   */
  async forceUnlock(name: string, kind: BoardKind, holder: string): Promise<{ unlocked: boolean; holders: string[] }> {
    const lock = await this.readOne(
      name,
      kind === 'read-write' ? 'read-write' : kind === 'semaphore' ? 'semaphore' : 'lock',
    );
    if (!lock || lock.holders.length === 0) throw new BoardConflict(`"${name}" is not held any more.`);
    const holders = lock.holders.map((h) => h.owner);
    if (!holders.includes(holder)) {
      throw new BoardConflict(
        `"${name}" is held by ${holders.join(', ')} now, not ${holder}: look again before unlocking.`,
      );
    }
    let unlocked: boolean;
    if (lock.kind === 'read-write') {
      const rw = this.client.getReadWriteLock(name);
      const sides = await Promise.all([
        lock.holders.some((h) => h.side === 'write') ? rw.writeLock().forceUnlock() : false,
        lock.holders.some((h) => h.side === 'read') ? rw.readLock().forceUnlock() : false,
      ]);
      unlocked = sides.some(Boolean);
    } else if (lock.kind === 'simple') unlocked = await this.client.getSimpleLock(name).forceUnlock();
    else if (lock.kind === 'fair') unlocked = await this.client.getFairLock(name).forceUnlock();
    else if (lock.kind === 'reentrant') unlocked = await this.client.getLock(name).forceUnlock();
    else throw new BoardConflict('A semaphore has no force-unlock: its permits come back when their leases end.');
    this.activity.forced(name, lock.kind, holders);
    this.latest = undefined; // the next page refresh reads Redis again
    return { unlocked, holders };
  }

  private async read(): Promise<BoardState> {
    const { settings, client } = this;
    const base = {
      at: Date.now(),
      prefix: client.keyPrefix,
      masters: mastersOf(client.redis).length,
      cluster: client.redis.isCluster,
      scanPerRefresh: settings.scanPerRefresh,
      maxLocks: settings.maxLocks,
      refreshMs: settings.refreshMs,
      forceUnlock: settings.forceUnlock,
      statsWindowMs: STATS_WINDOW_MS,
      statsBucketMs: STATS_BUCKET_MS,
    };
    const activity = { events: this.activity.events.recent(), labels: this.activity.stats.rows() };
    try {
      await bounded(this.scan.step(settings.scanPerRefresh), client.operationTimeout * 2, { name: 'board scan' });
      const candidates = this.scan.names();
      // Names this process took since the last refresh show at once, before the scan comes to them.
      for (const [name, known] of this.activity.acquiredSince(settings.refreshMs * 2)) {
        if (!candidates.has(name)) candidates.set(name, known.family);
      }
      const chosen = [...candidates].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).slice(0, settings.maxLocks);
      const read = await Promise.all(chosen.map(([name, family]) => this.readOne(name, family)));
      const locks: BoardLock[] = [];
      read.forEach((lock, i) => {
        if (lock)
          locks.push({
            ...lock,
            canForceUnlock: settings.forceUnlock && lock.kind !== 'semaphore' && lock.holders.length > 0,
          });
        else this.scan.forget(chosen[i][0]);
      });
      // Names not read this time are counted as found; those read and found free are not.
      const namesKnown = locks.length + candidates.size - chosen.length;
      return { ...base, ...activity, locks, namesKnown, scanPasses: this.scan.completedPasses };
    } catch (error) {
      engineOf(client).logger.warn(`Lock board: could not read Redis: ${(error as Error).message}`);
      return {
        ...base,
        ...activity,
        locks: [],
        namesKnown: 0,
        scanPasses: this.scan.completedPasses,
        error: describeFailure(error),
      };
    }
  }

  /** One lock as the board shows it, or undefined when it is free and nobody waits. */
  private async readOne(name: string, family: ScannedKind): Promise<BoardLock | undefined> {
    const { client } = this;
    const known = this.activity.knownName(name);
    const describe = { key: name, name: 'board read' };
    // The kinds whose holds LockClient.inspect does not read: their own read-only scripts, bounded alike.
    const own =
      family === 'read-write'
        ? inspectReadWriteLock(client.redis, name, readWriteKeys(client.keyPrefix, name), MOST_LISTED).then((seen) =>
            lockFromReadWrite(seen, known),
          )
        : family === 'semaphore'
          ? inspectSemaphore(client.redis, name, semaphoreKeys(client.keyPrefix, name), MOST_LISTED).then((seen) =>
              lockFromSemaphore(seen, known),
            )
          : undefined;
    if (own) return bounded(own, client.operationTimeout, describe);
    return lockFromInspection(await client.inspect(name), known);
  }
}

/**
 * What the page may say about a failed read: the error's class and, for our own errors, nothing that
 * could carry an address or a credential (ioredis messages may name hosts).
 */
function describeFailure(error: unknown): string {
  if (error instanceof RedisUnavailableError) return 'RedisUnavailableError: Redis did not answer in time; retrying.';
  const name = error instanceof Error ? error.name : 'Error';
  return `${name}: Redis could not be read; see the application's log.`;
}
