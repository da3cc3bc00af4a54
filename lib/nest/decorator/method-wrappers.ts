import { catchError, defer, EMPTY, from, isObservable, lastValueFrom, throwError, type Observable } from 'rxjs';
import { LockAcquireTimeoutError, LockError, LockOptionsError } from '../../engine/errors';
import type { RedisLockRuntime } from '../module/redis-lock.runtime';
import { messages } from '../redis-lock.messages';
import { claimInvocation, recordResult, runAsHandlerCall } from './handler-invocation';
import { keyFunctionNames, renderKeyTemplate } from './key-template';
import { lockedObservable } from './locked-observable';
import { handlerTypeOf, lockSpecOf, type LockSpec } from './lock-spec';
import { methodBindings } from './method-bindings';
import { graphqlKeyArgs, LockGraphQLError, lockFailureOf, logLockFailure } from './transport-errors';
import { DEFAULT_CONFLICT_STATUS } from '../redis-lock.constants';

// What @DistributedLock() puts in place of the methods it decorates.

const WRAPPED = Symbol('redis-lock:wrapped');

export type AnyMethod = (this: unknown, ...args: unknown[]) => unknown;

/**
 * The wrapper of a decorated method. Called by Nest as a handler (the interceptor holds the lock
 * already): passes through. Otherwise, for a method that is not a handler: locks, then calls it.
 */
export function lockingMethod(prototype: object, methodName: string, original: AnyMethod): AnyMethod {
  const returnsObservable = isObservableType(Reflect.getMetadata('design:returntype', prototype, methodName));
  const wrapper = function (this: unknown, ...args: unknown[]): unknown {
    const invocation = claimInvocation(wrapper);
    if (invocation) return recordResult(invocation, original.apply(this, args));
    let spec: LockSpec | null;
    try {
      spec = lockSpecOf(prototype.constructor, wrapper, methodName); // validated at bootstrap, cached
    } catch (error) {
      return returnsObservable ? throwError(() => error) : Promise.reject(error);
    }
    // A route or message handler called directly (not by Nest): its key reads a request it does not have.
    // A GraphQL resolver called without the interceptor (a field resolver without fieldResolverEnhancers,
    // a direct call) locks over its arguments, as a method: it must not run unlocked.
    if (!spec || (spec.handlerType && spec.handlerType !== 'graphql')) return original.apply(this, args);
    const call = () => original.apply(this, args);
    if (returnsObservable) {
      const runtime = runtimeFor(this, spec);
      if (runtime instanceof Error) return throwError(() => runtime);
      return lockedMethodObservable(runtime, spec, args, call);
    }
    const notObservable = () => {
      const result = call();
      if (isObservable(result)) throw new LockOptionsError(messages.observableNotDeclared(spec.owner));
      return result;
    };
    if (spec.handlerType === 'graphql') return lockedResolverCall(this, spec, args, notObservable);
    // A job's, a consumer's, a service's method: its work is followed as a handler's is (see
    // lockedObservable): promises it started still running when its result settles keep the lock, and a
    // returned async iterator keeps it until it ends.
    const runtime = runtimeFor(this, spec);
    if (runtime instanceof Error) return Promise.reject(runtime);
    return lastValueFrom(lockedMethodObservable(runtime, spec, args, notObservable), { defaultValue: undefined });
  };
  Object.defineProperty(wrapper, 'name', { value: original.name });
  Object.defineProperty(wrapper, WRAPPED, { value: true });
  copyMetadata(original, wrapper);
  return wrapper;
}

/** A method returning an Observable, locked while it is subscribed; `onBusy: 'skip'` completes it unrun. */
function lockedMethodObservable(
  runtime: RedisLockRuntime,
  spec: LockSpec,
  args: unknown[],
  call: () => unknown,
): Observable<unknown> {
  return defer(() => {
    let ran = false;
    let names: string[] = [];
    const locked = lockedObservable({
      runtime,
      spec,
      name: async () => (names = await methodLockName(spec, args)),
      run: () => {
        ran = true;
        const result = call();
        return isObservable(result) ? result : from(Promise.resolve(result));
      },
      newScope: spec.newScope,
    });
    if (spec.onBusy !== 'skip') return locked;
    return locked.pipe(
      catchError((error: unknown) => {
        // Only a wait that ran out: the method's own LockAcquireTimeoutError (a nested lock) did run it.
        if (!(error instanceof LockAcquireTimeoutError) || ran) throw error;
        runtime.logger.debug?.(messages.skippedBusy(spec.owner, names.join('+')));
        return EMPTY;
      }),
    );
  });
}

/**
 * A GraphQL resolver Nest calls without the interceptor (a field resolver, a direct call): locked over
 * its arguments, its lock failures told as the interceptor tells them.
 */
async function lockedResolverCall(
  self: unknown,
  spec: LockSpec,
  args: unknown[],
  call: () => unknown,
): Promise<unknown> {
  const runtime = runtimeFor(self, spec);
  if (runtime instanceof Error) throw runtime;
  let ran = false;
  try {
    const names = await methodLockName(spec, args);
    const locked = () =>
      runtime.locks.withLock(names, () => ((ran = true), call()), {
        kind: spec.kind,
        waitTime: spec.waitTime,
        leaseTime: spec.leaseTime,
        newScope: spec.newScope,
        label: spec.label,
        permits: spec.permits,
        mode: spec.mode,
      });
    // A request in flight all the same: its wait ends as closing starts (see LockService.shutdownSignal),
    // or closing the server would wait for it.
    return await runAsHandlerCall(spec, locked);
  } catch (error) {
    if (!ran) throw graphqlFailure(runtime, spec, error);
    throw error;
  }
}

/** The application whose instance `self` is. */
function runtimeFor(self: unknown, spec: LockSpec): RedisLockRuntime | LockError {
  if (self === null || (typeof self !== 'object' && typeof self !== 'function')) {
    return new LockError(messages.missingThis(spec.owner));
  }
  return methodBindings.runtimeOf(self) ?? new LockError(messages.unboundMethod(spec.owner));
}

async function methodLockName(spec: LockSpec, args: unknown[]): Promise<string[]> {
  if (typeof spec.key === 'function') return keyFunctionNames(await spec.key(...args));
  const sources = { args: spec.handlerType === 'graphql' ? graphqlKeyArgs(args) : args };
  return spec.keys.map((key) => renderKeyTemplate(key, sources));
}

/** A GraphQL resolver's lock failure as its clients read it, logged as the interceptor logs it. */
function graphqlFailure(runtime: RedisLockRuntime, spec: LockSpec, error: unknown): unknown {
  const failure = lockFailureOf(error, {
    conflictStatus: runtime.options.conflictStatus ?? DEFAULT_CONFLICT_STATUS,
    typicalHoldMs: runtime.holdTimes.typicalOf(spec),
  });
  if (!failure) return error;
  logLockFailure(runtime.logger, spec.owner, failure, error);
  return new LockGraphQLError(failure, { cause: error });
}

/**
 * A class decorator locks the class's handlers through the interceptor. Their methods get a
 * pass-through wrapper too, only so that the interceptor learns when a handler's Promise settles.
 */
export function passThroughHandlers(classRef: { prototype: Record<string, unknown>; name: string }): void {
  const prototype = classRef.prototype;
  for (const name of Object.getOwnPropertyNames(prototype)) {
    if (name === 'constructor') continue;
    const descriptor = Object.getOwnPropertyDescriptor(prototype, name);
    const method = descriptor?.value as AnyMethod | undefined;
    if (typeof method !== 'function' || WRAPPED in method || !handlerTypeOf(method)) continue;
    const wrapper = function (this: unknown, ...args: unknown[]): unknown {
      const invocation = claimInvocation(wrapper);
      const result = method.apply(this, args);
      return invocation ? recordResult(invocation, result) : result;
    };
    Object.defineProperty(wrapper, 'name', { value: method.name });
    Object.defineProperty(wrapper, WRAPPED, { value: true });
    copyMetadata(method, wrapper);
    Object.defineProperty(prototype, name, { ...descriptor, value: wrapper });
  }
}

/** rxjs' Observable or a subclass (Subject…), also from another copy of rxjs. */
function isObservableType(type: unknown): boolean {
  const prototype = (type as { prototype?: Record<string, unknown> } | undefined)?.prototype;
  return (
    typeof type === 'function' && typeof prototype?.subscribe === 'function' && typeof prototype.pipe === 'function'
  );
}

/** Other decorators' metadata (routes, guards, Swagger, @Cron…) stays readable on the wrapper. */
function copyMetadata(from: object, to: object): void {
  for (const key of Reflect.getOwnMetadataKeys(from)) {
    Reflect.defineMetadata(key, Reflect.getOwnMetadata(key, from), to);
  }
}
