import { LockError } from './lock-error';

/** Redis did not answer within the operation timeout (down, unreachable or failing over). */
export class RedisUnavailableError extends LockError {
  constructor(key: string | undefined, operation: string, timeoutMs: number, cause?: unknown) {
    const why = cause instanceof Error ? `: ${cause.message}` : '';
    super(
      `Redis did not complete "${operation}"${key ? ` for lock "${key}"` : ''} within ${timeoutMs} ms${why}. ` +
        'Check that Redis is reachable; the client reconnects by itself.',
      key,
      { cause },
    );
  }
}
