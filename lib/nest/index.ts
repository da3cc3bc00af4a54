// The NestJS integration: RedisLockModule, LockService, @DistributedLock() and @CurrentLock().
export { RedisLockModule } from './module/redis-lock.module';
export type { RedisLockModuleForRootOptions, RedisLockModuleAsyncOptions } from './module/redis-lock.module-definition';
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
} from './module/redis-lock-module-options';
export { LockService } from './service/lock.service';
export {
  LOCK_KINDS,
  type LockKind,
  type SingleLockKind,
  type LockCallOptions,
  type WithLockCallOptions,
} from './service/lock-options';
export { DistributedLock } from './decorator/distributed-lock.decorator';
export type { DistributedLockOptions, LockKeyFactory, LockKeyResult } from './decorator/distributed-lock-options';
export { DistributedLockInterceptor } from './decorator/distributed-lock.interceptor';
export type { LockSpec, HandlerType } from './decorator/lock-spec';
export type { KeyTemplate, KeyPlaceholder, KeyRoot, KeySources } from './decorator/key-template';
export { CurrentLock } from './decorator/current-lock.decorator';
export type { ActiveLock } from './service/active-lock';
export { LockKeyError } from './errors/lock-key-error';
export { LockModuleClosedError } from './errors/lock-module-closed-error';
export { nestLockLogger } from './module/nest-lock-logger';
