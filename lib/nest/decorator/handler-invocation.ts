import { AsyncLocalStorage } from 'node:async_hooks';

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

// Process-wide by nature: it carries one call from the interceptor to the method's wrapper along the
// async call chain (the wrapper lives on the class, shared by every application).
const invocations = new AsyncLocalStorage<HandlerInvocation>();

/**
 * Whether the current call chain is a handler's call by Nest (a request or message in flight), or runs
 * inside one: closing the server waits for it, so its waits for locks end as closing starts.
 */
export function inHandlerCall(): boolean {
  return invocations.getStore() !== undefined;
}

/**
 * Runs `fn` as a handler's call (see inHandlerCall), for a handler Nest calls without the interceptor:
 * a GraphQL field resolver without fieldResolverEnhancers, which locks itself.
 */
export function runAsHandlerCall<T>(handler: object, fn: () => T): T {
  if (inHandlerCall()) return fn();
  // Claimed already: nothing inside takes it for its own call.
  return invocations.run({ handler, claimed: true }, fn);
}

// One store for every request: nothing inside claims it (see claimInvocation), so nothing writes to it.
const REQUEST_IN_FLIGHT: HandlerInvocation = Object.freeze({
  handler: Object.freeze({}),
  claimed: true,
}) as HandlerInvocation;

/** Runs `fn` as a request in flight (see inHandlerCall): the module's HTTP middleware, for every route. */
export function runAsRequest<T>(fn: () => T): T {
  return invocations.run(REQUEST_IN_FLIGHT, fn);
}

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

/**
 * Records a returned Promise. Its settling does not end the work: promises it started (a step that lost
 * a `Promise.race`) keep the lock until they settle too (see PendingWork).
 */
export function recordResult<T>(invocation: HandlerInvocation, result: T): T {
  // Only real promises: calling then() on a lazy thenable would run it a second time.
  if (result instanceof Promise) invocation.settled = result.then(noop, noop);
  return result;
}

function noop(): void {}
