import type { Provider } from '@nestjs/common';
import { createLockClient, type LockClientSettings } from '../../connection/create-lock-client';
import { describeConnection } from '../../connection/describe-connection';
import { connectRedLockMasters } from '../../connection/red-lock-masters';
import { LockOptionsError } from '../../engine/errors';
import { LockClient } from '../../engine/client/lock-client';
import { nestLockLogger } from './nest-lock.logger';
import { REDIS_LOCK_MODULE_OPTIONS } from '../redis-lock.constants';
import { moduleOptionsProblems, type RedisLockModuleOptions } from './redis-lock-module.options';
import { messages } from '../redis-lock.messages';

/** The module's RedLock masters, one LockClient each (none unless `redLock` is configured); closed with the module. */
export class RedLockMasters {
  constructor(readonly clients: readonly LockClient[]) {}
}

/** Everything the module connects at start-up. */
interface ModuleConnections {
  client: LockClient;
  masters: RedLockMasters;
}

const MODULE_CONNECTIONS = 'REDIS_LOCK:MODULE_CONNECTIONS';

/**
 * Validates the options, then connects: bad options or an unreachable Redis fail the application's
 * startup, leaving no connection open behind them.
 */
async function connect(options: RedisLockModuleOptions): Promise<ModuleConnections> {
  const problems = moduleOptionsProblems(options);
  if (problems.length > 0) throw new LockOptionsError(messages.invalidModuleOptions(problems));
  const {
    waitTime: _wait,
    leaseTime: _lease,
    conflictStatus: _status,
    shutdownTimeout: _s,
    redLock,
    logger,
    ...settings
  } = options;
  // An unreachable Redis fails the application's start-up with a RedisUnavailableError naming the address.
  const clientLogger = logger ?? nestLockLogger();
  const client = await createLockClient({ ...settings, logger: clientLogger });
  clientLogger.log?.(messages.connected(describeConnection(settings.connection), client.keyPrefix));
  if (!redLock) return { client, masters: new RedLockMasters([]) };
  // instanceTimeout, driftFactor and restartQuarantine apply per lock (LockService.redLock), not per connection.
  const { connection: _connection, replicaSync: _sync, clientId: _id, ...shared } = settings;
  const masterSettings: LockClientSettings = { ...shared, logger: clientLogger };
  try {
    return { client, masters: new RedLockMasters(await connectRedLockMasters(redLock.masters, masterSettings)) };
  } catch (error) {
    await client.close();
    throw error;
  }
}

const moduleConnectionsProvider: Provider = {
  provide: MODULE_CONNECTIONS,
  useFactory: connect,
  inject: [REDIS_LOCK_MODULE_OPTIONS],
};

/** The module's LockClient, injectable as `LockClient`, and its RedLock masters. */
export const lockClientProviders: Provider[] = [
  moduleConnectionsProvider,
  { provide: LockClient, useFactory: (c: ModuleConnections) => c.client, inject: [MODULE_CONNECTIONS] },
  { provide: RedLockMasters, useFactory: (c: ModuleConnections) => c.masters, inject: [MODULE_CONNECTIONS] },
];
