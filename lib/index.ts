// The public API of nestjs-redis-lock: what an application imports. Every value here is listed in
// docs/api.md and nothing else is (test/package/public-api.spec.ts compares them). What tests,
// benchmarks and scripts need beyond it (DI tokens, helpers, the engine's parts) is in ./internal,
// which package.json does not export.

// NestJS: the module, the decorators, the service.
export { RedisLockModule } from './nest/module/redis-lock.module';
export type {
  RedisLockModuleForRootOptions,
  RedisLockModuleAsyncOptions,
} from './nest/module/redis-lock.module-definition';
export type {
  RedisLockModuleOptions,
  RedisLockOptionsFactory,
  RedLockModuleOptions,
} from './nest/module/redis-lock-module.options';
export { DISTRIBUTED_LOCK_METADATA } from './nest/redis-lock.constants';
export { DistributedLock } from './nest/decorator/distributed-lock.decorator';
export type { DistributedLockOptions, LockKeyFactory, LockKeyResult } from './nest/decorator/distributed-lock.options';
export { DistributedLockInterceptor } from './nest/decorator/distributed-lock.interceptor';
export type { LockSpec, HandlerType } from './nest/decorator/lock-spec';
export type { KeyTemplate, KeyPlaceholder, KeyRoot, KeySources } from './nest/decorator/key-template';
export { LockGraphQLError, type LockFailure, type LockFailureCode } from './nest/decorator/transport-errors';
export { CurrentLock } from './nest/decorator/current-lock.decorator';
export type { ActiveLock } from './nest/service/active-lock';
export { LockService } from './nest/service/lock.service';
export type {
  LockKind,
  SingleLockKind,
  LockCallOptions,
  WithLockCallOptions,
} from './nest/service/lock-service.options';

// The lock engine: a client, the locks it hands out (types: get them from the client), and the
// two locks built over several.
export { LockClient, type LockClientOptions } from './engine/client/lock-client';
export { MultiLock, type MultiLockContext } from './engine/groups/multi-lock';
export { RedLock, type RedLockOptions } from './engine/groups/red-lock';
export { runInLockScope } from './engine/holds/owner-scope';
export type { LockTelemetryOptions } from './engine/client/telemetry';
export type { ReentrantLock } from './engine/kinds/reentrant-lock';
export type { FairLock, FairLockOptions } from './engine/kinds/fair-lock';
export type { SimpleLock, SimpleLockOptions, SimpleLockContext } from './engine/kinds/simple-lock';
export type { ReadWriteLock } from './engine/kinds/read-write-lock';
export type { ReadLock } from './engine/kinds/read-lock';
export type { WriteLock, ReadWriteLockOptions } from './engine/kinds/write-lock';
export type { Semaphore, SemaphoreOptions, PermitAcquireOptions } from './engine/kinds/semaphore';
export type { LockBase, WithLockOptions } from './engine/lock/lock-base';
export type { GroupLockContext, GroupLockHandle } from './engine/groups/group-lock';
export type { MultiLockHandle } from './engine/groups/multi-lock-handle';
export type { RedLockHandle } from './engine/groups/red-lock-handle';
export type { LockHandle, LockContext, ReleaseOutcome } from './engine/holds/lock-handle';
export type { AcquireOptions } from './engine/lock/acquire-options';
export type {
  LockClientEvents,
  LockAcquiredEvent,
  LockWaitingEvent,
  LockTimedOutEvent,
  LockReleasedEvent,
  LockRenewedEvent,
  LockKindName,
} from './engine/client/lock-events';
export type { LockInspection, LockHolder, QueuedWaiter } from './engine/client/inspection';
export type { LockClientHealth } from './engine/client/client-health';
export type { LockLogger } from './engine/util/logger';
export type { ReplicaSyncOptions, ReplicaSyncSetting } from './engine/redis/replica-sync';

// Connections: a client over a deployment, from options or the environment.
export {
  createLockClient,
  type RedisLockClientOptions,
  type LockClientSettings,
} from './connection/create-lock-client';
export { connectRedLockMasters } from './connection/red-lock-masters';
export { lockOptionsFromEnv } from './connection/env';
export type * from './connection/connection-options';

// Errors: all extend LockError.
export {
  LockError,
  LockOptionsError,
  LockNotHeldError,
  LockAcquireTimeoutError,
  LockLostError,
  LockUpgradeError,
  RedisUnavailableError,
  RedisRefusedError,
  LockQuorumError,
  ConnectionConfigError,
  ReplicaSyncError,
} from './engine/errors';
export type { RedisRefusal } from './engine/errors';
export { LockKeyError } from './nest/errors/lock-key-error';
export { LockModuleClosedError } from './nest/errors/lock-module-closed-error';
export { LockCallCancelledError } from './nest/errors/lock-call-cancelled-error';
export { LockCallEndedError } from './nest/errors/lock-call-ended-error';
