import type { RedLockSubjectId } from './red-lock-subjects';

/** Messages between bench/scenarios/red-lock.ts and bench/red-lock-worker.ts (Node IPC). */
export type ToRedLockWorker =
  /** Loop on `name` with `subject`; each critical section: GET `counterKey`, sleep `sectionMs`, SET it + 1. */
  | { type: 'run'; subject: RedLockSubjectId; name: string; counterKey: string; sectionMs: number }
  /** The measurement window starts now. */
  | { type: 'mark' }
  /** Stop the loop; report the grants since 'mark'. */
  | { type: 'stop' }
  | { type: 'exit' };

export type FromRedLockWorker =
  | { type: 'ready'; pid: number }
  | { type: 'started' }
  | { type: 'marked' }
  | { type: 'result'; result: RedLockWorkerResult }
  | { type: 'error'; message: string };

export interface RedLockWorkerResult {
  pid: number;
  /** Critical sections run since 'run' (for the lost-update check). */
  total: number;
  /** Grants between 'mark' and 'stop'. */
  inWindow: number;
  /** Request -> grant, ms, of those grants. */
  waits: number[];
  /** CPU (user + system) between 'mark' and 'stop', ms. */
  cpuMs: number;
  /** Times the library gave up on its own between 'mark' and 'stop' and was asked again. */
  giveUps: number;
}
