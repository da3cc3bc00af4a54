import { isError } from './is-error';
import { LockError } from './lock-error';

/**
 * Redis did not answer within the operation timeout (down, unreachable or failing over), or could not
 * be reached at all when connecting. `address` says where, when known (never credentials).
 */
export class RedisUnavailableError extends LockError {
  constructor(
    key: string | undefined,
    operation: string,
    timeoutMs: number,
    cause?: unknown,
    readonly address?: string,
  ) {
    // Wrapping another of its kind (a connect deadline that ran out): say what that one wraps, not its advice again.
    const reason = cause instanceof RedisUnavailableError ? cause.cause : cause;
    const why = isError(reason) ? `: ${reason.message.replace(/\.$/, '')}` : '';
    const what =
      operation === 'connect' && address
        ? `Could not connect to Redis at ${address} within ${timeoutMs} ms${why}.`
        : `Redis${address ? ` at ${address}` : ''} did not complete "${operation}"${key ? ` for lock "${key}"` : ''} within ${timeoutMs} ms${why}.`;
    super(`${what} Check that Redis is reachable; the client reconnects by itself.`, key, { cause });
  }
}
