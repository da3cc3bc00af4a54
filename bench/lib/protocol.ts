import type { ContenderId } from './contenders';
import type { CommandCounter } from './redis-stats';

/**
 * A critical section for locks with several holders: INCR a count of holders inside, check it
 * against `limit` (the semaphore's permits; none for a read lock), sleep `sectionMs`, DECR.
 */
export interface SharedSection {
  limit?: number;
}

/** Messages between bench/run.ts and bench/hot-key-worker.ts (Node IPC). */
export type ToWorker =
  /**
   * Start `loops` concurrent lock loops of `contender` on one key. Each critical section sleeps
   * `sectionMs` between its MGET and its MSET (0, the default: no sleep).
   */
  | { type: 'run'; contender: ContenderId; key: string; loops: number; sectionMs?: number; shared?: SharedSection }
  /** The measurement window starts now: snapshot the command counter. */
  | { type: 'mark' }
  /** Stop the loops; report what happened with acquire times in [windowStart, windowEnd] (nowMs()). */
  | { type: 'stop'; windowStart: number; windowEnd: number }
  | { type: 'exit' };

export type FromWorker =
  | { type: 'ready'; pid: number }
  | { type: 'started' }
  | { type: 'marked' }
  | { type: 'result'; result: WorkerResult }
  | { type: 'error'; message: string };

export interface WorkerResult {
  pid: number;
  /** Acquisitions whose critical section ran, over the whole run (for the lost-update check). */
  total: number;
  /** Acquisitions granted inside the window. */
  inWindow: number;
  /** Request -> grant, ms, for grants inside the window. */
  waits: number[];
  /** Previous holder's release -> this grant, ms, for grants inside the window. */
  handoffs: number[];
  /** The same, only where the previous holder was another process. */
  crossHandoffs: number[];
  /** Commands this worker's connections sent between 'mark' and 'stop'. */
  sent: CommandCounter;
  /** Of those, the critical sections' own requests (MGET + MSET per grant). */
  csRequests: number;
  /** CPU time (user + system) this worker used between 'mark' and 'stop'. */
  cpuMs: number;
  giveUps: number;
  /** Shared sections: the most holders seen inside at once, and how often that exceeded the limit. */
  maxInside: number;
  overLimit: number;
}

export const counterKey = (key: string): string => `bench:cs:{${key}}:counter`;
export const releasedAtKey = (key: string): string => `bench:cs:{${key}}:released-at`;
export const insideKey = (key: string): string => `bench:cs:{${key}}:inside`;
