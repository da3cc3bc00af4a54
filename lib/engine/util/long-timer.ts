import { monotonicNow } from './clock';

/** setTimeout's own limit (about 24.8 days); a longer delay would fire after 1 ms. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** A timer that may run for longer than setTimeout allows. Never keeps the process alive. */
export interface LongTimer {
  clear(): void;
}

/**
 * Like an unref'd setTimeout, for any delay: a delay past MAX_TIMER_MS is waited in chunks,
 * re-armed until the deadline, so a long lease is never reported as ended 1 ms in.
 */
export function setLongTimeout(callback: () => void, delayMs: number): LongTimer {
  const deadline = monotonicNow() + Math.max(0, delayMs);
  let timer: NodeJS.Timeout;
  const arm = (): void => {
    const remaining = deadline - monotonicNow();
    if (remaining <= MAX_TIMER_MS) {
      timer = setTimeout(callback, Math.max(0, remaining));
    } else {
      timer = setTimeout(arm, MAX_TIMER_MS);
    }
    timer.unref();
  };
  arm();
  return { clear: () => clearTimeout(timer) };
}
