import { AsyncLocalStorage } from 'node:async_hooks';
import { outsideWork } from './pending-work';

/** A handler's async iterator, wrapped to keep its call's lock, and when it has ended. */
export interface LockedIterator {
  readonly iterator: AsyncIterableIterator<unknown>;
  readonly ended: Promise<void>;
}

/**
 * `value`'s async iterator, if it has one (a GraphQL subscription's events, the counterpart of an SSE
 * stream), wrapped so that its call's lock is kept until it finishes, fails, or is closed with
 * `return()` (the client unsubscribed or left; `cancel` is called first, so the work's signal aborts
 * before the lock goes). Its steps run in the call's context, as the handler did: `current()` and
 * re-entry work there, and the promises they start count as the call's work. Call it from inside the
 * work's call chain.
 */
export function lockedIterator(value: unknown, cancel: () => void): LockedIterator | undefined {
  if (!isAsyncIterable(value)) return undefined;
  const inner = value[Symbol.asyncIterator]();
  const inCall = AsyncLocalStorage.snapshot();
  let finish!: () => void;
  // Outside the work's chain: the promise the release waits for is not the work's.
  const ended = outsideWork(() => new Promise<void>((resolve) => (finish = resolve)));
  /** One step of the inner iterator, in the call's context; it has ended once it says done or fails. */
  const step = (call: () => Promise<IteratorResult<unknown>>, last = false) =>
    inCall(call).then(
      (result) => {
        if (last || result.done) finish();
        return result;
      },
      (error: unknown) => {
        finish();
        throw error;
      },
    );
  const iterator: AsyncIterableIterator<unknown> = {
    next: (...args: [] | [unknown]) => step(() => inner.next(...args)),
    return: (result?: unknown) => {
      cancel();
      return step(() => inner.return?.(result) ?? Promise.resolve({ done: true as const, value: result }), true);
    },
    throw: (error?: unknown) => step(() => inner.throw?.(error) ?? Promise.reject(error), true),
    [Symbol.asyncIterator]() {
      return this;
    },
  };
  return { iterator, ended };
}

function isAsyncIterable(value: unknown): value is AsyncIterable<unknown> {
  return (
    value !== null &&
    typeof value === 'object' &&
    typeof (value as Partial<AsyncIterable<unknown>>)[Symbol.asyncIterator] === 'function'
  );
}
