// The NestJS integration: RedisLockModule, LockService, @DistributedLock() and @CurrentLock().
export { RedisLockModule } from './redis-lock.module';
export type { RedisLockModuleForRootOptions, RedisLockModuleAsyncOptions } from './redis-lock.module-definition';
export {
  REDIS_LOCK_MODULE_OPTIONS,
  DISTRIBUTED_LOCK_METADATA,
  DEFAULT_CONFLICT_STATUS,
  DEFAULT_SHUTDOWN_TIMEOUT,
} from './redis-lock.constants';
export type {
  RedisLockModuleOptions,
  RedisLockOptionsFactory,
  RedLockModuleOptions,
} from './redis-lock-module-options';
export { LockService } from './lock.service';
export {
  LOCK_KINDS,
  type LockKind,
  type SingleLockKind,
  type LockCallOptions,
  type WithLockCallOptions,
} from './lock-options';
export { DistributedLock } from './distributed-lock.decorator';
export type { DistributedLockOptions, LockKeyFactory, LockKeyResult } from './distributed-lock-options';
export { DistributedLockInterceptor } from './distributed-lock.interceptor';
export type { LockSpec, HandlerType } from './lock-spec';
export type { KeyTemplate, KeyPlaceholder, KeyRoot, KeySources } from './key-template';
export { CurrentLock } from './current-lock.decorator';
export type { ActiveLock } from './active-lock';
export { LockKeyError } from './lock-key-error';
export { LockModuleClosedError } from './lock-module-closed-error';
export { nestLockLogger } from './nest-lock-logger';
