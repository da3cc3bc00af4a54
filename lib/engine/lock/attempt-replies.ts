import type { Attempt } from '../waiting/acquire-loop';
import type { WaitingFlag } from '../scripts/catalog';
import type { AttemptStatus } from '../scripts/replies';
import type { Grant, WaitingAttempt } from './lock-side';

/** An attempt script's reply as the acquire loop takes it. */
export function attemptOutcome(
  status: AttemptStatus,
  value: number,
  holder?: string,
  othersWaiting?: 0 | 1,
): Attempt<Grant> {
  if (status === 'refused') return { acquired: false, ttl: value };
  return {
    acquired: true,
    value: { fencingToken: value, reentered: status === 'reentered', holder, othersWaiting: othersWaiting === 1 },
  };
}

/** The waiting flag of lock-4.lua / simple-lock-5.lua for an attempt. */
export function waitingFlag(waiting: WaitingAttempt | undefined): WaitingFlag {
  if (!waiting) return 'once';
  if (waiting.othersWaiting) return '1';
  return waiting.refusedBefore ? '0' : '-';
}
