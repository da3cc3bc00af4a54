// The duration rule lives in validation.ts with every other input rule; these names stay importable
// from here for the modules that still do (lock-base, simple-lock, fair-lock, lock-client, lib/nest).
export {
  checkDuration,
  durationProblem,
  MAX_LEASE_MS,
  MAX_TIMEOUT_MS,
  show,
  wholeMilliseconds,
  type DurationRule,
} from './validation';
