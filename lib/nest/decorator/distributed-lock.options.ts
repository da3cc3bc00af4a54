import type { ExecutionContext } from '@nestjs/common';
import type { LockKind } from '../service/lock-service.options';

/**
 * Builds a lock name. On a route or message handler it receives the `ExecutionContext`; on any other
 * method it receives the method's arguments. It may be async. Return a non-empty string (or number),
 * or a non-empty list of them for a multi-key lock.
 */
export type LockKeyFactory<A extends unknown[] = [ExecutionContext]> = (
  ...args: A
) => LockKeyResult | Promise<LockKeyResult>;

/** One lock name, or several (a multi-key lock). */
export type LockKeyResult = string | number | readonly (string | number)[];

/** Options of `@DistributedLock()`. Times are in milliseconds. */
export interface DistributedLockOptions<A extends unknown[] = [ExecutionContext]> {
  /**
   * The lock name: a template, a list of templates (a multi-key lock, e.g.
   * `['account:{body.from}', 'account:{body.to}']`) or a function. Templates read, on an HTTP route, `{params.id}`,
   * `{query.x}`, `{body.y}`, `{headers.x-tenant}`, `{user.id}`; on an RPC / WebSocket handler
   * `{data.id}`; on any other method its arguments, `{0}`, `{1.id}` or `{args.0.id}`. A referenced
   * value that is missing or empty takes no lock and fails the call (400 over HTTP). `{{` and `}}`
   * are literal braces.
   */
  key: string | readonly string[] | LockKeyFactory<A>;
  /**
   * Lock kind; default 'reentrant'. `'redlock'`: a majority of the module's `redLock.masters` (one key).
   * A list of keys locks every name all-or-nothing (a MultiLock of this kind), in one global order.
   */
  kind?: LockKind;
  /** Shorthand for `kind: 'fair'`. */
  fair?: boolean;
  /**
   * Longest wait for the lock; `0` = one attempt; `Infinity` = until free. Default: the module's
   * `waitTime`, else until free (simple lock: 3 s). Over HTTP, running out answers 409 (see
   * `conflictStatus`) with a `Retry-After` header.
   */
  waitTime?: number;
  /** Lease; `'watchdog'` = renewed while held. Default: the module's `leaseTime`, else the watchdog (simple lock: 3 s). */
  leaseTime?: number | 'watchdog';
  /**
   * Methods that are not handlers join the caller's lock scope, so a call nested in another locked
   * call re-enters its locks. `true` gives each call a fresh scope (parallel calls inside one request
   * then exclude each other). Handlers always get a fresh scope per request.
   */
  newScope?: boolean;
  /**
   * Methods that are not handlers (a `@Cron` job, a consumer): what a call does when the lock stays
   * busy for all of `waitTime`. 'throw' (default): rejects with LockAcquireTimeoutError. 'skip':
   * resolves undefined without running the method, logged at debug level only, for jobs that every
   * instance schedules and one runs (`waitTime: 0, onBusy: 'skip'`).
   */
  onBusy?: 'throw' | 'skip';
  /**
   * A semaphore instead of a lock: at most `permits` calls at once across every instance (say, 5
   * concurrent calls to a payment provider), each call taking one permit with its own lease. One
   * key; no `kind` or `fair`. The limit lives with the name: use one value per name everywhere.
   */
  permits?: number;
  /**
   * A read-write lock instead: calls with `mode: 'read'` on a name run together, a `'write'` call runs
   * alone (a waiting writer holds back new readers). Its keys are apart from the plain lock's. No `kind`.
   */
  mode?: 'read' | 'write';
  /**
   * The lock's name in events and metrics (the `lock.name` attribute): default the key template
   * (`order:{params.id}`, one series for every order), none for a key function. Keep it bounded.
   */
  label?: string;
}
