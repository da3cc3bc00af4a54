import { RedisUnavailableError } from './errors';

/**
 * Races a Redis operation against a timer so that an unreachable Redis yields a RedisUnavailableError
 * within `timeoutMs` instead of a hang (ioredis would otherwise queue the command while it
 * reconnects). The operation itself is not cancelled: callers that must undo a late success (an
 * acquire that lands after we gave up) use `onLateResult`.
 */
export function bounded<T>(
  operation: Promise<T>,
  timeoutMs: number,
  describe: { key?: string; name: string; onUnavailable?: () => void },
  onLateResult?: (value: T) => void,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let settled = false;
    const timer = setTimeout(() => {
      settled = true;
      describe.onUnavailable?.();
      reject(new RedisUnavailableError(describe.key, describe.name, timeoutMs));
    }, timeoutMs);
    timer.unref();
    operation.then(
      (value) => {
        if (settled) {
          onLateResult?.(value);
          return;
        }
        settled = true;
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        if (!isConnectionError(error)) return reject(error);
        describe.onUnavailable?.();
        reject(new RedisUnavailableError(describe.key, describe.name, timeoutMs, error));
      },
    );
  });
}

/** ioredis reports a dead or failing-over server with plain Errors; script and type errors must stay as they are. */
function isConnectionError(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  if (error.name === 'MaxRetriesPerRequestError' || error.name === 'ClusterAllFailedError') return true;
  return /Connection is closed|Stream isn't writeable|ECONNREFUSED|ECONNRESET|ETIMEDOUT|EPIPE|Command timed out|max retries per request|All sentinels are unreachable|Failed to refresh slots cache|None of startup nodes is available|CLUSTERDOWN|TRYAGAIN|LOADING|MASTERDOWN|READONLY|UNBLOCKED/i.test(
    error.message,
  );
}
