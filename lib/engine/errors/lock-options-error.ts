import { LockError } from './lock-error';

/** Bad input (empty or oversized key, negative or non-finite times, …), raised before any Redis call. */
export class LockOptionsError extends LockError {}
