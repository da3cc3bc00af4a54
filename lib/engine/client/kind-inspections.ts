import type { ReadWriteKeys, SemaphoreKeys } from '../redis/keys';
import type { RedisClient } from '../redis/redis-client';
import { READ_WRITE_INSPECT, SEMAPHORE_INSPECT } from '../scripts/catalog';

/** One owner's hold on a side of a read-write lock, or one acquisition of semaphore permits. */
export interface TimedHold {
  owner: string;
  /** Re-entrant holds (read-write lock); permits it holds (semaphore). */
  count: number;
  /** Until its lease ends (Redis server time); null when the key has no expiry. */
  remainingLeaseMs: number | null;
}

/** A waiter with a deadline (a read-write lock's waiting writer). */
export interface TimedWaiter {
  owner: string;
  /** Until its intent lapses, unless it tries again (Redis server time). */
  expiresInMs: number;
}

/** A snapshot of one read-write lock, read atomically; lists cut at the `most` asked for. */
export interface ReadWriteInspection {
  name: string;
  /** The write holder (hold count in `count`, the write lease in `remainingLeaseMs`), if any. */
  writers: TimedHold[];
  /** Live read holds, soonest expiry first. */
  readers: TimedHold[];
  readerCount: number;
  /**
   * Writers waiting, one entry per wait (an owner waiting twice is listed twice): each holds new readers
   * back until its intent lapses.
   */
  waitingWriters: TimedWaiter[];
  waitingWriterCount: number;
  fencingToken: number | null;
}

/** A snapshot of one semaphore, read atomically; lists cut at the `most` asked for. */
export interface SemaphoreInspection {
  name: string;
  /** The limit set with setPermits; null: each client's configured `permits` applies. */
  storedLimit: number | null;
  permitsInUse: number;
  /** Live holds, soonest expiry first: `owner` is the hold's token (its handle's `owner`), `count` its permits. */
  holds: TimedHold[];
  holdCount: number;
  fencingToken: number | null;
  /** Client ids of the processes waiting for permits, longest waiting first. */
  waitingClients: string[];
  waitingCount: number;
}

/** Reads the read-write lock under `keys` (see ReadWriteInspection). */
export async function inspectReadWriteLock(
  redis: RedisClient,
  name: string,
  keys: ReadWriteKeys,
  most: number,
): Promise<ReadWriteInspection> {
  const [pttl, flatWrite, flatReaders, readerCount, flatWriters, waitingWriterCount, fence] =
    await READ_WRITE_INSPECT.run(redis, keys, { most });
  const writers: TimedHold[] = [];
  for (let i = 0; i < flatWrite.length; i += 2) {
    writers.push({ owner: flatWrite[i], count: Number(flatWrite[i + 1]), remainingLeaseMs: pttl >= 0 ? pttl : null });
  }
  const readers: TimedHold[] = [];
  for (let i = 0; i < flatReaders.length; i += 3) {
    const [owner, count, msLeft] = [String(flatReaders[i]), Number(flatReaders[i + 1]), Number(flatReaders[i + 2])];
    readers.push({ owner, count, remainingLeaseMs: Math.max(0, msLeft) });
  }
  const waitingWriters: TimedWaiter[] = [];
  for (let i = 0; i < flatWriters.length; i += 2) {
    waitingWriters.push({ owner: String(flatWriters[i]), expiresInMs: Math.max(0, Number(flatWriters[i + 1])) });
  }
  const fencingToken = fence ? Number(fence) : null;
  return { name, writers, readers, readerCount, waitingWriters, waitingWriterCount, fencingToken };
}

/** Reads the semaphore under `keys` (see SemaphoreInspection). */
export async function inspectSemaphore(
  redis: RedisClient,
  name: string,
  keys: SemaphoreKeys,
  most: number,
): Promise<SemaphoreInspection> {
  const [limit, permitsInUse, flatHolds, holdCount, fence, waitingClients, waitingCount] = await SEMAPHORE_INSPECT.run(
    redis,
    keys,
    { most },
  );
  const holds: TimedHold[] = [];
  for (let i = 0; i < flatHolds.length; i += 2) {
    // A member, the hold's token, is '<permits>:<owner>:<uuid>' (see permit-lock.ts).
    const member = String(flatHolds[i]);
    const count = Number(member.slice(0, member.indexOf(':')));
    holds.push({ owner: member, count, remainingLeaseMs: Math.max(0, Number(flatHolds[i + 1])) });
  }
  const storedLimit = limit ? Number(limit) : null;
  const fencingToken = fence ? Number(fence) : null;
  return { name, storedLimit, permitsInUse, holds, holdCount, fencingToken, waitingClients, waitingCount };
}
