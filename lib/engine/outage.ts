import { RedisRefusedError, RedisUnavailableError } from './errors';

/**
 * Whether `error` says Redis cannot take the command for now, so that an idempotent command sent
 * again may land: Redis unreachable (down, failing over, busy with a long script) or refusing for a
 * while (full memory, a disk it cannot save to). A missing permission stays missing: not an outage.
 */
export function isOutage(error: unknown): boolean {
  return error instanceof RedisUnavailableError || (error instanceof RedisRefusedError && error.code !== 'NOPERM');
}
