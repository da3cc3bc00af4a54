/**
 * Base class of every error this library raises. `name` is the concrete class name (so logs and
 * `instanceof`-free checks both work) and `key` is the lock name the error is about, when there is one.
 */
export class LockError extends Error {
  override readonly name: string = this.constructor.name;

  constructor(
    message: string,
    readonly key?: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}
