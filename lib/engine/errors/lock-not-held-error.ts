import { LockError } from './lock-error';

/** An unlock or extend by an owner that does not hold the lock. Nothing was changed in Redis. */
export class LockNotHeldError extends LockError {
  constructor(
    key: string,
    readonly owner: string,
  ) {
    super(`Lock "${key}" is not held by owner "${owner}"; nothing was released.`, key);
  }
}
