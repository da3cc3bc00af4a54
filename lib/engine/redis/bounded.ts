import { monotonicNow } from '../util/clock';
import { LockOptionsError, RedisRefusedError, RedisUnavailableError, refusalCode } from '../errors';

/** What a bounded operation is, for its errors. */
export interface BoundedOperation {
  readonly key?: string;
  readonly name: string;
  readonly onUnavailable?: () => void;
  /** The connection does not follow promotions: READONLY is a refusal, not a failover (see writesToFixedServer). */
  readonly readOnlyIsFinal?: boolean;
}

/**
 * Races a Redis operation against a deadline so that an unreachable Redis yields a RedisUnavailableError
 * within `timeoutMs` instead of a hang (ioredis would otherwise queue the command while it
 * reconnects). The operation itself is not cancelled: callers that must undo a late success (an
 * acquire that lands after we gave up) use `onLateResult`.
 */
export function bounded<T>(
  operation: Promise<T>,
  timeoutMs: number,
  describe: BoundedOperation,
  onLateResult?: (value: T) => void,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const deadline = boundedDeadline(timeoutMs, describe, reject);
    operation.then(
      (value) => {
        if (!deadline.expire) {
          onLateResult?.(value);
          return;
        }
        deadline.expire = undefined;
        resolve(value);
      },
      (error: unknown) => {
        if (!deadline.expire) return;
        deadline.expire = undefined;
        reject(boundedFailure(error, timeoutMs, describe));
      },
    );
  });
}

/**
 * bounded's deadline alone, for a caller that follows its operation with a handler of its own (one
 * promise less per operation): `onTimeout` gets a RedisUnavailableError after `timeoutMs` unless the
 * caller cleared `expire` first (it then owns the outcome).
 */
export function boundedDeadline(
  timeoutMs: number,
  describe: BoundedOperation,
  onTimeout: (error: RedisUnavailableError) => void,
): Deadline {
  return deadlinesOf(timeoutMs).add(() => {
    describe.onUnavailable?.();
    onTimeout(new RedisUnavailableError(describe.key, describe.name, timeoutMs));
  });
}

/** What bounded rejects with when its operation fails with `error` before the deadline. */
export function boundedFailure(error: unknown, timeoutMs: number, describe: BoundedOperation): unknown {
  const refusal = refusalCode(error, describe.readOnlyIsFinal);
  if (refusal) return new RedisRefusedError(describe.key, describe.name, refusal, error as Error);
  if (isSubscriberMode(error)) return subscriberModeError(describe.key);
  if (!isConnectionError(error)) return error;
  describe.onUnavailable?.();
  return new RedisUnavailableError(describe.key, describe.name, timeoutMs, error);
}

export interface Deadline {
  readonly at: number;
  /**
   * Cleared once the operation settles or the deadline expires (the sweep then skips it): a settled
   * deadline still queued must not keep its closure, and through it the operation's promise, alive.
   */
  expire?: () => void;
}

/**
 * The pending deadlines of one timeout length, in the order they were set, which is also the order
 * they fall due: one timer for the oldest pending one instead of a timer per Redis operation, which
 * a lock taken in a loop would create and clear twice per acquisition.
 */
class DeadlineQueue {
  private queue: Deadline[] = [];
  private head = 0;
  private timer?: NodeJS.Timeout;

  constructor(private readonly timeoutMs: number) {}

  add(expire: () => void): Deadline {
    while (this.head < this.queue.length && !this.queue[this.head].expire) this.head++;
    // Everything queued has settled (the rule when operations do not overlap): start over, so settled
    // deadlines are not kept past a scavenge.
    if (this.head === this.queue.length) this.startOver();
    else if (this.head > 1024 && this.head * 2 > this.queue.length) {
      this.queue = this.queue.slice(this.head);
      this.head = 0;
    }
    const deadline: Deadline = { at: monotonicNow() + this.timeoutMs, expire };
    this.queue.push(deadline);
    if (!this.timer) this.arm(deadline.at);
    return deadline;
  }

  private arm(at: number): void {
    this.timer = setTimeout(this.sweep, Math.max(0, at - monotonicNow()));
    this.timer.unref();
  }

  private readonly sweep = (): void => {
    this.timer = undefined;
    const now = monotonicNow();
    while (this.head < this.queue.length) {
      const next = this.queue[this.head];
      const { expire } = next;
      if (expire && next.at > now) break;
      this.head++;
      if (expire) {
        next.expire = undefined;
        expire();
      }
    }
    if (this.head >= this.queue.length) this.startOver();
    else this.arm(this.queue[this.head].at);
  };

  private startOver(): void {
    this.queue = [];
    this.head = 0;
  }
}

const queues = new Map<number, DeadlineQueue>();

function deadlinesOf(timeoutMs: number): DeadlineQueue {
  let queue = queues.get(timeoutMs);
  if (!queue) {
    queue = new DeadlineQueue(timeoutMs);
    queues.set(timeoutMs, queue);
  }
  return queue;
}

/** ioredis 5 (RESP2) refuses any other command on a connection that has subscribed to a channel. */
function isSubscriberMode(error: unknown): boolean {
  return error instanceof Error && /^Connection in subscriber mode/.test(error.message);
}

function subscriberModeError(key: string | undefined): LockOptionsError {
  return new LockOptionsError(
    'The lock connection is subscribed to a channel, and ioredis then refuses every other command: give the ' +
      'lock client a connection that does not subscribe (e.g. client.duplicate()).',
    key,
    { option: 'redis', value: 'a subscribed connection' },
  );
}

/**
 * ioredis reports a dead or failing-over server with plain Errors, and a server busy with a script
 * past busy-reply-threshold answers BUSY until it ends; script and type errors must stay as they are.
 */
function isConnectionError(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  if (error.name === 'MaxRetriesPerRequestError' || error.name === 'ClusterAllFailedError') return true;
  return /Connection is closed|Stream isn't writeable|ECONNREFUSED|ECONNRESET|ETIMEDOUT|EPIPE|Command timed out|max retries per request|All sentinels are unreachable|Failed to refresh slots cache|None of startup nodes is available|CLUSTERDOWN|TRYAGAIN|LOADING|MASTERDOWN|READONLY|UNBLOCKED|^BUSY /i.test(
    error.message,
  );
}
