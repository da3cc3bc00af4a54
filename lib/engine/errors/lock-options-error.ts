import { LockError } from './lock-error';

/**
 * Bad input (empty or oversized key, a time that is not a usable number of milliseconds, …), raised
 * before any Redis call. `option` and `value` name what was wrong, when it was one option.
 */
export class LockOptionsError extends LockError {
  readonly option?: string;
  readonly value?: unknown;

  constructor(message: string, key?: string, details: { option?: string; value?: unknown } = {}) {
    super(message, key);
    this.option = details.option;
    this.value = details.value;
  }
}
