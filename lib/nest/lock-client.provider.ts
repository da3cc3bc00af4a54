import type { Provider } from '@nestjs/common';
import type { HostPort } from '../connection/connection-options';
import { isRedisDeployment } from '../connection/create-deployment';
import { createLockClient } from '../connection/create-lock-client';
import { LockError, LockOptionsError } from '../engine/errors';
import { LockClient } from '../engine/lock-client';
import { nestLockLogger } from './nest-lock-logger';
import { REDIS_LOCK_MODULE_OPTIONS } from './redis-lock.constants';
import { moduleOptionsProblems, type RedisLockModuleOptions } from './redis-lock-module-options';
import { messages } from './redis-lock.messages';

/** Validates the options, then connects: bad options or an unreachable Redis fail the application's startup. */
async function connect(options: RedisLockModuleOptions): Promise<LockClient> {
  const problems = moduleOptionsProblems(options);
  if (problems.length > 0) throw new LockOptionsError(messages.invalidModuleOptions(problems));
  const {
    waitTime: _wait,
    leaseTime: _lease,
    conflictStatus: _status,
    shutdownTimeout: _s,
    logger,
    ...settings
  } = options;
  try {
    return await createLockClient({ ...settings, logger: logger ?? nestLockLogger() });
  } catch (error) {
    if (error instanceof LockError) throw error;
    const reason = (error as Error).message.replace(/\.$/, '');
    throw new LockError(messages.cannotConnect(describeConnection(options), reason), undefined, { cause: error });
  }
}

/** Where we tried to connect, without credentials. */
function describeConnection({ connection }: RedisLockModuleOptions): string {
  if (isRedisDeployment(connection)) return `the ${connection.type} deployment given`;
  const address = ({ host, port }: HostPort) => `${host}:${port}`;
  switch (connection.type) {
    case 'single': {
      if (connection.url === undefined) return `${connection.host ?? '127.0.0.1'}:${connection.port ?? 6379}`;
      const url = new URL(connection.url);
      return `${url.hostname}:${url.port || 6379}`;
    }
    case 'master-slave':
      return `master ${address(connection.master)}`;
    case 'sentinel':
      return `sentinels ${connection.sentinels.map(address).join(', ')} (master "${connection.masterName}")`;
    case 'cluster':
      return `cluster nodes ${connection.nodes.map(address).join(', ')}`;
    default:
      return 'the client given';
  }
}

/** The module's LockClient, injectable as `LockClient`. */
export const lockClientProvider: Provider = {
  provide: LockClient,
  useFactory: connect,
  inject: [REDIS_LOCK_MODULE_OPTIONS],
};
