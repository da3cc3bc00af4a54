/** Injection token of the options given to `RedisLockModule.forRoot()` / `forRootAsync()`. */
export const REDIS_LOCK_MODULE_OPTIONS = 'REDIS_LOCK:MODULE_OPTIONS';

/** Metadata key under which `@DistributedLock()` stores its options (on a method or a class). */
export const DISTRIBUTED_LOCK_METADATA = 'REDIS_LOCK:DISTRIBUTED_LOCK';

/** The status a request gets when the lock stays held by someone else for the whole `waitTime`. */
export const DEFAULT_CONFLICT_STATUS = 409;

/** How long shutdown waits for locked work still running before releasing its locks anyway. */
export const DEFAULT_SHUTDOWN_TIMEOUT = 10_000;
