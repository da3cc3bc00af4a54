import { Logger, type LoggerService } from '@nestjs/common';
import type { LockLogger } from '../../engine/util/logger';

/**
 * The engine's logger on top of a Nest logger, so lost locks and failed renewals show up in the
 * application's log (context "RedisLock"). The module uses it unless `logger` is given. Internal: an
 * application's `logger` is any object with `warn` and `error` (and optionally `debug`) taking a message.
 */
export function nestLockLogger(logger: LoggerService = new Logger('RedisLock')): LockLogger {
  return {
    debug: (message) => logger.debug?.(message),
    log: (message) => logger.log(message),
    warn: (message) => logger.warn(message),
    error: (message) => logger.error(message),
  };
}
