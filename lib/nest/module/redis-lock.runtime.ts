import { Inject, Injectable, type ExecutionContext } from '@nestjs/common';
import { engineOf } from '../../engine/client/lock-client';
import type { LockLogger } from '../../engine/util/logger';
import { HoldTimes } from '../decorator/hold-times';
import { LockService } from '../service/lock.service';
import { LockLifecycle } from './redis-lock.lifecycle';
import { REDIS_LOCK_MODULE_OPTIONS } from '../redis-lock.constants';
import type { RedisLockModuleOptions } from './redis-lock-module.options';

/**
 * What one application's RedisLockModule keeps while it runs, for the interceptor, the explorer and
 * the wrappers of decorated methods: its LockService, the lifecycle of locked work, how long its
 * handlers hold their locks, and the calls being intercepted. One per application, so two
 * applications in one process share nothing.
 */
@Injectable()
export class RedisLockRuntime {
  /** Typical hold time per decorated handler: `Retry-After` of a refused request. */
  readonly holdTimes = new HoldTimes();
  /**
   * Calls already being locked. A handler decorated on its class and on itself gets the interceptor
   * twice (one ExecutionContext per call, shared by its interceptors): only the first one locks.
   */
  readonly interceptedCalls = new WeakSet<ExecutionContext>();

  constructor(
    @Inject(LockService) readonly locks: LockService,
    @Inject(LockLifecycle) readonly lifecycle: LockLifecycle,
    @Inject(REDIS_LOCK_MODULE_OPTIONS) readonly options: RedisLockModuleOptions,
  ) {}

  /** The engine's logger, for what the wrappers of decorated methods report. */
  get logger(): LockLogger {
    return engineOf(this.locks.client).logger;
  }
}
