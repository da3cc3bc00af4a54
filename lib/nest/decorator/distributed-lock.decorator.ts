import { applyDecorators, SetMetadata, UseInterceptors, type ExecutionContext } from '@nestjs/common';
import { LockOptionsError } from '../../engine/errors';
import { DISTRIBUTED_LOCK_METADATA } from '../redis-lock.constants';
import { messages } from '../redis-lock.messages';
import type { DistributedLockOptions } from './distributed-lock.options';
import { DistributedLockInterceptor } from './distributed-lock.interceptor';
import { lockingMethod, passThroughHandlers, type AnyMethod } from './method-wrappers';

/**
 * Runs the decorated method holding a distributed lock.
 *
 * - On a **route or message handler** (or a controller / gateway class, for all its handlers) the
 *   lock is taken by `DistributedLockInterceptor`, which this decorator applies: the key template
 *   reads the request (`'article:{params.id}'`), the message (`'{data.id}'`) or a GraphQL resolver's
 *   arguments (`'post:{args.id}'`), and each request runs in its own lock scope.
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

function wrapForLocking(target: object, propertyKey?: string | symbol, descriptor?: PropertyDescriptor): void {
  if (propertyKey === undefined || descriptor === undefined) {
    passThroughHandlers(target as { prototype: Record<string, unknown>; name: string });
    return;
  }
  const owner = `${typeof target === 'function' ? target.name : target.constructor.name}.${String(propertyKey)}`;
  if (typeof target === 'function' || typeof descriptor.value !== 'function') {
    throw new LockOptionsError(messages.notAMethod(owner));
  }
  descriptor.value = lockingMethod(target, String(propertyKey), descriptor.value as AnyMethod);
}
