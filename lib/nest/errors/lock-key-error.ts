import { LockOptionsError } from '../../engine/errors';

/**
 * A lock key could not be built for this call: a value its template refers to is missing, empty or
 * not a scalar, the key function returned nothing usable, or the name came out too long. No lock was
 * taken. Over HTTP the interceptor answers 400 Bad Request with it as the cause.
 */
export class LockKeyError extends LockOptionsError {
  constructor(
    message: string,
    /** The key template (or "(key function)") the name was built from. */
    readonly template: string,
    /** The placeholder that had no usable value, when there is one, e.g. "{params.id}". */
    readonly placeholder?: string,
  ) {
    super(message, template);
  }
}
