// Not a public entry point (package.json does not export it): the public API plus the internals that
// the tests, benchmarks and scripts reach for. Nothing here is promised to users.
export * from './index';

// The engine's classes as values, its defaults and limits, keys and pub/sub.
export { ReentrantLock } from './engine/reentrant-lock';
export { FairLock, FAIR_LOCK_DEFAULTS } from './engine/fair-lock';
export { SimpleLock, SIMPLE_LOCK_DEFAULTS } from './engine/simple-lock';
export { ReadWriteLock, ReadLock, WriteLock, READ_WRITE_LOCK_DEFAULTS } from './engine/read-write-lock';
export { Semaphore, MAX_PERMITS } from './engine/semaphore';
export { LockBase } from './engine/lock-base';
export { GroupLock } from './engine/group-lock';
export { MultiLockHandle } from './engine/multi-lock';
export { RedLockHandle } from './engine/red-lock';
export { LockHandle } from './engine/lock-handle';
export { engineOf } from './engine/lock-client';
export { currentScope, type OwnerScope } from './engine/owner-scope';
export {
  lockKeys,
  readWriteKeys,
  semaphoreKeys,
  encodeName,
  type LockKeys,
  type ReadWriteKeys,
  type SemaphoreKeys,
} from './engine/keys';
export { MAX_NAME_BYTES } from './engine/validation';
export { RedisPubSub } from './engine/pubsub';
export type { PublishCommand } from './engine/redis-client';

// Connection strategies.
export { DEPLOY_TYPES } from './connection/connection-options';
export { createDeployment, connectionProblems, isRedisDeployment } from './connection/create-deployment';
export { LOCK_ENV_VARIABLES } from './connection/env';
export { SingleDeployment } from './connection/single-deployment';
export { MasterSlaveDeployment } from './connection/master-slave-deployment';
export { SentinelDeployment } from './connection/sentinel-deployment';
export { ClusterDeployment } from './connection/cluster-deployment';
export { ExistingClientDeployment } from './connection/existing-client-deployment';

// The Nest layer's defaults and building blocks.
export { DEFAULT_CONFLICT_STATUS, DEFAULT_SHUTDOWN_TIMEOUT } from './nest/redis-lock.constants';
export { LOCK_KINDS } from './nest/service/lock-options';
export { compileLockSpec } from './nest/decorator/lock-spec';
export { parseKeyTemplate, renderKeyTemplate, keyFunctionResult } from './nest/decorator/key-template';
export { LockLifecycle } from './nest/module/lock-lifecycle';
