import { applyDecorators, SetMetadata, UseInterceptors, type ExecutionContext } from '@nestjs/common';
import { isObservable, from, throwError } from 'rxjs';
import { LockAcquireTimeoutError, LockError, LockOptionsError } from '../../engine/errors';
import { claimInvocation, recordResult } from '../service/active-lock';
import type { DistributedLockOptions } from './distributed-lock-options';
import { DistributedLockInterceptor } from './distributed-lock.interceptor';
import { keyFunctionNames, renderKeyTemplate } from './key-template';
import { lockedObservable } from './locked-observable';
import { handlerTypeOf, lockSpecOf, type LockSpec } from './lock-spec';
import type { LockService } from '../service/lock.service';
import { methodBindings } from './method-bindings';
import { DISTRIBUTED_LOCK_METADATA } from '../redis-lock.constants';
import { messages } from '../redis-lock.messages';

/**
 * Runs the decorated method holding a distributed lock.
 *
 * - On a **route or message handler** (or a controller / gateway class, for all its handlers) the
 *   lock is taken by `DistributedLockInterceptor`, which this decorator applies: the key template
 *   reads the request (`'article:{params.id}'`) or the message (`'{data.id}'`), and each request
 *   runs in its own lock scope.
 * - On **any other method of a provider** (a `@Cron` job, a queue consumer, a service method) the
 *   method itself is wrapped: the key reads its arguments (`'{0}'`, `'{args.0.id}'`) and the call
 *   joins the caller's lock scope, so nested calls re-enter. `this`, the arguments, the result and
 *   thrown errors are the method's own; the result is awaited under the lock, so the method returns a
 *   Promise (a method declared to return an Observable returns one that locks while subscribed).
 *
 * Inside, `@CurrentLock()` / `LockService.current()` give the lock's `signal` and `fencingToken`.
 * Invalid options fail `app.init()` with a message naming the class and method.
 * @example
 * @Put(':id')
 * @DistributedLock({ key: 'article:{params.id}', waitTime: 2_000 })
 * update(@Param('id') id: string, @Body() dto: UpdateArticleDto, @CurrentLock() lock: ActiveLock) {
 *   return this.articles.update(id, dto, lock.fencingToken);
 * }
 *
 * @Cron('0 * * * *')
 * @DistributedLock({ key: 'hourly-rollup', waitTime: 0 })
 * async rollup() { … } // runs on one instance at a time
 */
export function DistributedLock<A extends unknown[] = [ExecutionContext]>(
  options: DistributedLockOptions<A>,
): ClassDecorator & MethodDecorator {
  return applyDecorators(
    wrapForLocking,
    SetMetadata(DISTRIBUTED_LOCK_METADATA, options),
    UseInterceptors(DistributedLockInterceptor),
  );
}

const WRAPPED = Symbol('redis-lock:wrapped');

type AnyMethod = (this: unknown, ...args: unknown[]) => unknown;

function wrapForLocking(target: object, propertyKey?: string | symbol, descriptor?: PropertyDescriptor): void {
  if (propertyKey === undefined || descriptor === undefined) {
    wrapClassHandlers(target as { prototype: Record<string, unknown>; name: string });
    return;
  }
  const owner = `${typeof target === 'function' ? target.name : target.constructor.name}.${String(propertyKey)}`;
  if (typeof target === 'function' || typeof descriptor.value !== 'function') {
    throw new LockOptionsError(messages.notAMethod(owner));
  }
  descriptor.value = lockingMethod(target, String(propertyKey), descriptor.value as AnyMethod);
}

/**
 * The wrapper of a decorated method. Called by Nest as a handler (the interceptor holds the lock
 * already): passes through. Otherwise, for a method that is not a handler: locks, then calls it.
 */
function lockingMethod(prototype: object, methodName: string, original: AnyMethod): AnyMethod {
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
    if (!spec || spec.handlerType) return original.apply(this, args);
    const call = () => original.apply(this, args);
    if (returnsObservable) {
      const locks = lockServiceFor(this, spec);
      if (locks instanceof Error) return throwError(() => locks);
      return lockedObservable({
        locks,
        spec,
        name: () => methodLockName(spec, args),
        run: () => {
          const result = call();
          return isObservable(result) ? result : from(Promise.resolve(result));
        },
        newScope: spec.newScope,
      });
    }
    return runLocked(this, spec, args, () => {
      const result = call();
      if (isObservable(result)) throw new LockOptionsError(messages.observableNotDeclared(spec.owner));
      return result;
    });
  };
  Object.defineProperty(wrapper, 'name', { value: original.name });
  Object.defineProperty(wrapper, WRAPPED, { value: true });
  copyMetadata(original, wrapper);
  return wrapper;
}

async function runLocked(self: unknown, spec: LockSpec, args: unknown[], call: () => unknown): Promise<unknown> {
  const locks = lockServiceFor(self, spec);
  if (locks instanceof Error) throw locks;
  const names = await methodLockName(spec, args);
  let ran = false;
  try {
    return await locks.withLock(names, () => ((ran = true), call()), {
      kind: spec.kind,
      waitTime: spec.waitTime,
      leaseTime: spec.leaseTime,
      newScope: spec.newScope,
      label: spec.label,
      permits: spec.permits,
      mode: spec.mode,
    });
  } catch (error) {
    // Only a wait that ran out: the method's own LockAcquireTimeoutError (a nested lock) did run it.
    if (spec.onBusy !== 'skip' || !(error instanceof LockAcquireTimeoutError) || ran) throw error;
    locks.client.logger.debug?.(messages.skippedBusy(spec.owner, names.join('+')));
    return undefined;
  }
}

function lockServiceFor(self: unknown, spec: LockSpec): LockService | LockError {
  if (self === null || (typeof self !== 'object' && typeof self !== 'function')) {
    return new LockError(messages.missingThis(spec.owner));
  }
  return methodBindings.lockServiceOf(self) ?? new LockError(messages.unboundMethod(spec.owner));
}

async function methodLockName(spec: LockSpec, args: unknown[]): Promise<string[]> {
  if (typeof spec.key === 'function') return keyFunctionNames(await spec.key(...args));
  return spec.keys.map((key) => renderKeyTemplate(key, { args }));
}

/**
 * A class decorator locks the class's handlers through the interceptor. Their methods get a
 * pass-through wrapper too, only so that the interceptor learns when a handler's Promise settles.
 */
function wrapClassHandlers(classRef: { prototype: Record<string, unknown>; name: string }): void {
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
