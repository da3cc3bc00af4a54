import type { RedisLockClientOptions } from '../../connection/create-lock-client';
import { MAX_TURN_MS } from '../../engine/turns/process-turns';
import { connectionProblems, isRedisDeployment } from '../../connection/deployments/create-deployment';
import {
  durationProblem,
  IDLE_KEY_TTL_RULE,
  keyPrefixProblem,
  LEASE_RULE,
  show,
  RESTART_QUARANTINE_RULE,
  TIMEOUT_RULE,
  WAIT_RULE,
  type DurationRule,
} from '../../engine/util/validation';
import { replicaSyncProblems } from '../../engine/redis/replica-sync';
import { telemetryProblems } from '../../engine/client/telemetry';
import type { ConnectionOptions } from '../../connection/connection-options';
import type { RedisDeployment } from '../../connection/deployments/redis-deployment';
import type { RedLockOptions } from '../../engine/groups/red-lock';
import { messages } from '../redis-lock.messages';

/**
 * Options of `RedisLockModule.forRoot()` (and what the `forRootAsync()` factory returns): the lock
 * client's settings (`connection`, `keyPrefix`, `watchdogTimeout`, `operationTimeout`, `replicaSync`,
 * `logger`, `clientId`) plus the Nest layer's defaults. `lockOptionsFromEnv()` returns a valid value.
 */
export interface RedisLockModuleOptions extends RedisLockClientOptions {
  /**
   * Default wait of `@DistributedLock()` and `LockService.lock()` / `withLock()`, in ms; `Infinity` or
   * omitted: wait until the lock is free (the simple lock waits 3 s).
   */
  waitTime?: number;
  /** Default lease in ms. Omitted: the watchdog renews the lease while the lock is held (simple lock: 3 s). */
  leaseTime?: number;
  /** HTTP status when a decorated route cannot get its lock within `waitTime`. Default 409 Conflict. */
  conflictStatus?: number;
  /**
   * On shutdown, how long locked work still running (decorated calls, `withLock`) may take to finish
   * before its locks are released anyway, in ms. New locks are refused meanwhile. Default 10000.
   */
  shutdownTimeout?: number;
  /**
   * Independent Redis masters for `kind: 'redlock'` (`@DistributedLock`, `LockService.withLock`,
   * `LockService.redLock(name)`): one connection each, opened at start-up (a majority must answer),
   * closed on shutdown. Use an odd number, 3 or 5, on separate machines.
   */
  redLock?: RedLockModuleOptions;
}

/** `RedisLockModuleOptions.redLock`. */
export interface RedLockModuleOptions extends RedLockOptions {
  masters: (ConnectionOptions | RedisDeployment)[];
}

/** `forRootAsync({ useClass })` / `useExisting`: a provider that builds the options. */
export interface RedisLockOptionsFactory {
  createRedisLockOptions(): RedisLockModuleOptions | Promise<RedisLockModuleOptions>;
}

/** Everything wrong with the module options, each naming the option to fix. */
export function moduleOptionsProblems(options: RedisLockModuleOptions | undefined): string[] {
  if (!options || typeof options !== 'object') {
    return [messages.noModuleOptions()];
  }
  const problems: string[] = [];
  if (!isRedisDeployment(options.connection)) {
    problems.push(...connectionProblems(options.connection).map(messages.connectionProblem));
  }
  const prefix = keyPrefixProblem('keyPrefix', options.keyPrefix);
  if (prefix) problems.push(prefix);
  duration(problems, 'watchdogTimeout', options.watchdogTimeout, TIMEOUT_RULE);
  duration(problems, 'operationTimeout', options.operationTimeout, TIMEOUT_RULE);
  duration(problems, 'turnTime', options.turnTime, { max: MAX_TURN_MS });
  duration(problems, 'idleKeyTtl', options.idleKeyTtl, IDLE_KEY_TTL_RULE);
  duration(problems, 'waitTime', options.waitTime, { ...WAIT_RULE, infinite: true });
  duration(problems, 'leaseTime', options.leaseTime, LEASE_RULE);
  duration(problems, 'shutdownTimeout', options.shutdownTimeout);
  const drift = options.driftFactor;
  if (drift !== undefined && !(typeof drift === 'number' && drift >= 0 && drift < 1)) {
    problems.push(`driftFactor must be a number in [0, 1), got ${show(drift)}.`);
  }
  const status = options.conflictStatus;
  if (status !== undefined && !(Number.isInteger(status) && status >= 400 && status <= 599)) {
    problems.push(messages.badConflictStatus(show(status)));
  }
  const logger = options.logger as unknown as Record<string, unknown> | undefined;
  if (logger !== undefined && (typeof logger?.warn !== 'function' || typeof logger?.error !== 'function')) {
    problems.push(messages.badLogger());
  }
  if (options.clientId !== undefined && (typeof options.clientId !== 'string' || options.clientId.length === 0)) {
    problems.push(messages.badClientId(show(options.clientId)));
  }
  problems.push(...replicaSyncProblems(options.replicaSync));
  problems.push(...telemetryProblems(options.telemetry));
  if (options.redLock !== undefined) problems.push(...redLockProblems(options.redLock));
  return problems;
}

function duration(problems: string[], field: string, value: unknown, rule: DurationRule = {}) {
  const problem = durationProblem(field, value, rule);
  if (problem) problems.push(problem);
}

function redLockProblems(redLock: RedLockModuleOptions): string[] {
  if (!redLock || typeof redLock !== 'object' || !Array.isArray(redLock.masters) || redLock.masters.length === 0) {
    return [messages.redLockNeedsMasters()];
  }
  const problems = redLock.masters.flatMap((master, i) =>
    isRedisDeployment(master) ? [] : connectionProblems(master).map((p) => messages.redLockMasterProblem(i, p)),
  );
  duration(problems, 'redLock.instanceTimeout', redLock.instanceTimeout, TIMEOUT_RULE);
  duration(problems, 'redLock.restartQuarantine', redLock.restartQuarantine, RESTART_QUARANTINE_RULE);
  const drift = redLock.driftFactor;
  if (drift !== undefined && !(typeof drift === 'number' && drift >= 0 && drift < 1)) {
    problems.push(messages.badDriftFactor(show(drift)));
  }
  return problems;
}
