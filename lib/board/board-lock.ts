import type { LockInspection } from '../engine/client/inspection';
import type { ReadWriteInspection, SemaphoreInspection } from '../engine/client/kind-inspections';
import type { KnownName } from './lock-activity';

/** The kinds the board tells apart. */
export type BoardKind = 'reentrant' | 'fair' | 'simple' | 'read-write' | 'semaphore';

/** One holder as the board shows it. */
export interface BoardHolder {
  owner: string;
  /** Re-entrant holds (0: a fair lock handed over, not yet accepted); permits (semaphore). */
  count: number;
  /** Read-write lock: which side it holds. */
  side?: 'read' | 'write';
  /** What is left of its lease; null: no expiry. */
  remainingLeaseMs: number | null;
}

/** One waiter with a deadline: a fair lock's queue entry, or a read-write lock's waiting writer. */
export interface BoardWaiter {
  owner: string;
  /** A fair lock's own id of the wait. */
  waiterId?: string;
  expiresInMs: number;
}

/** One lock on the board (JSON of the state endpoint; see docs/board.md for each field). */
export interface BoardLock {
  name: string;
  kind: BoardKind;
  /** The label this process last acquired it with, if it did lately. */
  label?: string;
  state: 'held' | 'handing-over' | 'waiting';
  holders: BoardHolder[];
  /** Holders in all (a read-write lock's readers and a semaphore's holds are listed up to a bound). */
  holderCount: number;
  remainingLeaseMs: number | null;
  fencingToken: number | null;
  /** A fair lock's queue in order, or a read-write lock's waiting writers, each with its deadline. */
  queue: BoardWaiter[];
  queueCount: number;
  /** Client ids of the processes waiting (reentrant, simple, semaphore), longest waiting first. */
  waitingClients: string[];
  waitingCount: number;
  /** Semaphore: the permits held, and the limit stored with setPermits (null: each client's own). */
  permits?: { inUse: number; storedLimit: number | null };
  /** Whether the board offers force-unlock on it (enabled, held, and a kind that has one). */
  canForceUnlock: boolean;
}

/** A reentrant, fair or simple lock; undefined when nothing holds it and nobody waits. */
export function lockFromInspection(seen: LockInspection, known: KnownName | undefined): BoardLock | undefined {
  if (seen.state === 'free' && seen.queue.length === 0 && seen.waitingClients.length === 0) return undefined;
  // Redis keeps no kind: a string is a simple lock; a hash is fair when it has a queue or this process
  // took it as fair, else reentrant (a fair lock nobody waits for looks the same).
  const kind: BoardKind =
    seen.holdKind === 'token'
      ? 'simple'
      : seen.queue.length > 0 || known?.kind === 'fair'
        ? 'fair'
        : known?.kind === 'simple' && seen.holdKind === undefined
          ? 'simple'
          : 'reentrant';
  const holders = seen.holders.map((h) => ({
    owner: h.owner,
    count: h.holdCount,
    remainingLeaseMs: seen.remainingLeaseMs,
  }));
  return {
    name: seen.name,
    kind,
    label: known?.label,
    state: seen.state === 'free' ? 'waiting' : seen.state,
    holders,
    holderCount: holders.length,
    remainingLeaseMs: seen.remainingLeaseMs,
    fencingToken: seen.fencingToken,
    queue: seen.queue.map((w) => ({ owner: w.owner, waiterId: w.waiterId, expiresInMs: w.expiresInMs })),
    queueCount: seen.queue.length,
    waitingClients: seen.waitingClients,
    waitingCount: seen.waitingClients.length,
    canForceUnlock: false,
  };
}

/** A read-write lock; undefined when neither side is held and no writer waits. */
export function lockFromReadWrite(seen: ReadWriteInspection, known: KnownName | undefined): BoardLock | undefined {
  if (seen.writers.length === 0 && seen.readerCount === 0 && seen.waitingWriterCount === 0) return undefined;
  const holders: BoardHolder[] = [
    ...seen.writers.map((h) => ({
      owner: h.owner,
      count: h.count,
      side: 'write' as const,
      remainingLeaseMs: h.remainingLeaseMs,
    })),
    ...seen.readers.map((h) => ({
      owner: h.owner,
      count: h.count,
      side: 'read' as const,
      remainingLeaseMs: h.remainingLeaseMs,
    })),
  ];
  const leases = holders.map((h) => h.remainingLeaseMs).filter((ms): ms is number => ms !== null);
  return {
    name: seen.name,
    kind: 'read-write',
    label: known?.label,
    state: holders.length > 0 ? 'held' : 'waiting',
    holders,
    holderCount: seen.writers.length + seen.readerCount,
    remainingLeaseMs: leases.length > 0 ? Math.max(...leases) : null,
    fencingToken: seen.fencingToken,
    queue: seen.waitingWriters.map((w) => ({ owner: w.owner, expiresInMs: w.expiresInMs })),
    queueCount: seen.waitingWriterCount,
    waitingClients: [],
    waitingCount: seen.waitingWriterCount,
    canForceUnlock: false,
  };
}

/** A semaphore; undefined when no permit is held and nobody waits. */
export function lockFromSemaphore(seen: SemaphoreInspection, known: KnownName | undefined): BoardLock | undefined {
  if (seen.holdCount === 0 && seen.waitingCount === 0) return undefined;
  const holders = seen.holds.map((h) => ({ owner: h.owner, count: h.count, remainingLeaseMs: h.remainingLeaseMs }));
  return {
    name: seen.name,
    kind: 'semaphore',
    label: known?.label,
    state: seen.holdCount > 0 ? 'held' : 'waiting',
    holders,
    holderCount: seen.holdCount,
    remainingLeaseMs: holders.length > 0 ? Math.max(...holders.map((h) => h.remainingLeaseMs ?? 0)) : null,
    fencingToken: seen.fencingToken,
    queue: [],
    queueCount: 0,
    waitingClients: seen.waitingClients,
    waitingCount: seen.waitingCount,
    permits: { inUse: seen.permitsInUse, storedLimit: seen.storedLimit },
    canForceUnlock: false,
  };
}
