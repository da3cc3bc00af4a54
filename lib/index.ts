// Public API of nestjs-redis-lock. Everything users import comes from here.
export * from './engine/errors';
export { LockClient, type LockClientOptions } from './engine/lock-client';
export type {
  LockClientEvents,
  LockAcquiredEvent,
  LockWaitingEvent,
  LockTimedOutEvent,
  LockReleasedEvent,
  LockRenewedEvent,
  LockKindName,
} from './engine/lock-events';
export type { LockInspection, LockHolder, QueuedWaiter } from './engine/inspection';
export { TELEMETRY_SCOPE, type LockTelemetryOptions } from './engine/telemetry';
export type { LockClientHealth } from './engine/health';
export { ReentrantLock } from './engine/reentrant-lock';
export { FairLock, FAIR_LOCK_DEFAULTS, type FairLockOptions } from './engine/fair-lock';
export { SimpleLock, SIMPLE_LOCK_DEFAULTS, type SimpleLockOptions, type SimpleLockContext } from './engine/simple-lock';
export {
  ReadWriteLock,
  ReadLock,
  WriteLock,
  READ_WRITE_LOCK_DEFAULTS,
  type ReadWriteLockOptions,
} from './engine/read-write-lock';
export { LockBase, type WithLockOptions } from './engine/lock-base';
export { Semaphore, MAX_PERMITS, type SemaphoreOptions, type PermitAcquireOptions } from './engine/semaphore';
export { MultiLock, MultiLockHandle, type MultiLockContext } from './engine/multi-lock';
export { GroupLock, type GroupLockContext, type GroupLockHandle } from './engine/group-lock';
export { RedLock, RedLockHandle, type RedLockOptions } from './engine/red-lock';
export { LockHandle, type LockContext, type ReleaseOutcome } from './engine/lock-handle';
export type { AcquireOptions } from './engine/options';
export { runInLockScope, currentScope, type OwnerScope } from './engine/owner-scope';
export {
  lockKeys,
  readWriteKeys,
  semaphoreKeys,
  encodeName,
  MAX_NAME_BYTES,
  type LockKeys,
  type ReadWriteKeys,
  type SemaphoreKeys,
} from './engine/keys';
export { RedisPubSub, type PubSub } from './engine/pubsub';
export type { RedisClient, PublishCommand } from './engine/redis-client';
export type { LockLogger } from './engine/logger';
export type { ReplicaSyncOptions, ReplicaSyncSetting } from './engine/replica-sync';
export * from './connection';
export * from './nest';
