import { AsyncLocalStorage } from 'node:async_hooks';
import type { GroupLockContext } from '../../engine/group-lock';
import type { LockContext } from '../../engine/lock-handle';
import type { LockKind } from './lock-options';

/**
 * The lock a decorated handler or method, or a `LockService.withLock` callback, runs under: what
 * `@CurrentLock()` and `LockService.current()` return.
 */
export interface ActiveLock extends LockContext {
  /** The lock name (the rendered key template); several names joined by `+`. */
  readonly name: string;
  /** Every name locked, in the order given (one, unless the key was a list). */
  readonly names: readonly string[];
  /** The lock kind; `semaphore` for a permit (`permits`), `read` / `write` for a read-write lock (`mode`). */
  readonly kind: LockKind | 'semaphore' | 'read' | 'write';
  /**
   * The fencing token of each name, in `names` order; a RedLock's, one per master. `fencingToken` is
   * the first of them: with several names, pass each resource its own.
   */
  readonly fencingTokens: readonly (number | null)[];
}

const activeLocks = new AsyncLocalStorage<ActiveLock>();

/** The innermost lock held around the current call chain, if any. */
export function currentLock(): ActiveLock | undefined {
  return activeLocks.getStore();
}

export function runWithActiveLock<T>(lock: ActiveLock, fn: () => T): T {
  return activeLocks.run(lock, fn);
}

export function activeLock(
  names: readonly string[],
  kind: ActiveLock['kind'],
  context: LockContext | GroupLockContext,
): ActiveLock {
  const tokens = 'fencingTokens' in context ? context.fencingTokens : [context.fencingToken];
  return {
    name: names.join('+'),
    names,
    kind,
    get signal() {
      return context.signal;
    },
    fencingToken: tokens.find((t) => t !== null) ?? 0,
    fencingTokens: tokens,
    extend: (leaseTime?: number) => context.extend(leaseTime),
  };
}

/**
 * One call of a decorated handler by Nest, made by the interceptor. The method's wrapper claims it
 * (so it does not lock a second time) and records a returned Promise, so that a teardown (client
 * gone) releases the lock only once that work has settled.
 */
export interface HandlerInvocation {
  readonly handler: object;
  claimed: boolean;
  settled?: Promise<void>;
}

const invocations = new AsyncLocalStorage<HandlerInvocation>();

export function runInvocation<T>(invocation: HandlerInvocation, fn: () => T): T {
  return invocations.run(invocation, fn);
}

/** The interceptor's pending call of `handler`, if this is it; claims it. */
export function claimInvocation(handler: object): HandlerInvocation | undefined {
  const invocation = invocations.getStore();
  if (!invocation || invocation.handler !== handler || invocation.claimed) return undefined;
  invocation.claimed = true;
  return invocation;
}

export function recordResult<T>(invocation: HandlerInvocation, result: T): T {
  // Only real promises: calling then() on a lazy thenable would run it a second time.
  if (result instanceof Promise) invocation.settled = result.then(noop, noop);
  return result;
}

function noop(): void {}
