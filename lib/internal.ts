// Not a public entry point (package.json does not export it): the public API plus the internals that
// the tests, benchmarks and scripts reach for. Nothing here is promised to users.
export * from './index';

// Kept out of the public barrel: DI tokens, helpers and types an application never names.
export { REDIS_LOCK_MODULE_OPTIONS } from './nest/redis-lock.constants';
export { nestLockLogger } from './nest/module/nest-lock.logger';
export { TELEMETRY_SCOPE } from './engine/client/telemetry';
export { parseHostPorts } from './connection/addresses';
export type { RedisDeployment } from './connection/deployments/redis-deployment';

// The engine's classes as values, its defaults and limits, keys and pub/sub.
export { ReentrantLock } from './engine/kinds/reentrant-lock';
export { FairLock, FAIR_LOCK_DEFAULTS } from './engine/kinds/fair-lock';
export { SimpleLock, SIMPLE_LOCK_DEFAULTS } from './engine/kinds/simple-lock';
export { ReadWriteLock } from './engine/kinds/read-write-lock';
export { ReadLock } from './engine/kinds/read-lock';
export { WriteLock, READ_WRITE_LOCK_DEFAULTS } from './engine/kinds/write-lock';
export { Semaphore, MAX_PERMITS } from './engine/kinds/semaphore';
export { LockBase } from './engine/lock/lock-base';
export { GroupLock } from './engine/groups/group-lock';
export { MultiLockHandle } from './engine/groups/multi-lock-handle';
export { RedLockHandle } from './engine/groups/red-lock-handle';
export { LockHandle } from './engine/holds/lock-handle';
export { engineOf } from './engine/client/lock-client';
export { currentScope, type OwnerScope } from './engine/holds/owner-scope';
export {
  lockKeys,
  readWriteKeys,
  semaphoreKeys,
  encodeName,
  type LockKeys,
  type ReadWriteKeys,
  type SemaphoreKeys,
} from './engine/redis/keys';
export { MAX_NAME_BYTES } from './engine/util/validation';
export { RedisPubSub, type PubSub } from './engine/waiting/pubsub';
export type { PublishCommand, RedisClient } from './engine/redis/redis-client';

// Connection strategies.
export { DEPLOY_TYPES } from './connection/connection-options';
export { createDeployment, connectionProblems, isRedisDeployment } from './connection/deployments/create-deployment';
export { LOCK_ENV_VARIABLES } from './connection/env';
export { SingleDeployment } from './connection/deployments/single-deployment';
export { MasterSlaveDeployment } from './connection/deployments/master-slave-deployment';
export { SentinelDeployment } from './connection/deployments/sentinel-deployment';
export { ClusterDeployment } from './connection/deployments/cluster-deployment';
export { ExistingClientDeployment } from './connection/deployments/existing-client-deployment';

// The Nest layer's defaults and building blocks.
export { DEFAULT_CONFLICT_STATUS, DEFAULT_SHUTDOWN_TIMEOUT } from './nest/redis-lock.constants';
export { LOCK_KINDS } from './nest/service/lock-service.options';
export { compileLockSpec, handlerTypeOf } from './nest/decorator/lock-spec';
export { graphqlKeyArgs } from './nest/decorator/transport-errors';
export { parseKeyTemplate, renderKeyTemplate, keyFunctionResult } from './nest/decorator/key-template';
export { LockLifecycle } from './nest/module/redis-lock.lifecycle';
