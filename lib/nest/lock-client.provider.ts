import type { Provider } from '@nestjs/common';
import { createLockClient } from '../connection/create-lock-client';
import { LockOptionsError } from '../engine/errors';
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
  // An unreachable Redis fails the application's start-up with a RedisUnavailableError naming the address.
  return createLockClient({ ...settings, logger: logger ?? nestLockLogger() });
}

/** The module's LockClient, injectable as `LockClient`. */
export const lockClientProvider: Provider = {
  provide: LockClient,
  useFactory: connect,
  inject: [REDIS_LOCK_MODULE_OPTIONS],
};
