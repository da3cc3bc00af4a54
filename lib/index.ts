// Public API of nestjs-redis-lock. Everything users import comes from here.
export * from './engine/errors';
export { LockClient, type LockClientOptions, type LockClientEvents } from './engine/lock-client';
export { ReentrantLock } from './engine/reentrant-lock';
export { FairLock, FAIR_LOCK_DEFAULTS, type FairLockOptions } from './engine/fair-lock';
export { SimpleLock, SIMPLE_LOCK_DEFAULTS, type SimpleLockOptions, type SimpleLockContext } from './engine/simple-lock';
export { LockBase, type WithLockOptions } from './engine/lock-base';
export { MultiLock, MultiLockHandle, type MultiLockContext } from './engine/multi-lock';
export { RedLock, RedLockHandle, type RedLockOptions } from './engine/red-lock';
export { LockHandle, type LockContext, type ReleaseOutcome } from './engine/lock-handle';
export type { AcquireOptions } from './engine/options';
export { runInLockScope, currentScope, type OwnerScope } from './engine/owner-scope';
export { lockKeys, encodeName, MAX_NAME_BYTES, type LockKeys } from './engine/keys';
export { RedisPubSub, type PubSub } from './engine/pubsub';
export type { RedisClient, PublishCommand } from './engine/redis-client';
export type { LockLogger } from './engine/logger';
export type { ReplicaSyncOptions } from './engine/replica-sync';
export * from './connection';
export * from './nest';
