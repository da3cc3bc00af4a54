import { RedisRefusedError, RedisUnavailableError } from '../errors';

/**
 * Whether `error` says Redis cannot take the command for now, so that an idempotent command sent
 * again may land: Redis unreachable (down, failing over, busy with a long script) or refusing for a
 * while (full memory, a disk it cannot save to). A missing permission stays missing, and a server
 * demoted under a connection that does not follow promotions stays read-only: not outages.
 */
export function isOutage(error: unknown): boolean {
  if (error instanceof RedisUnavailableError) return true;
  return error instanceof RedisRefusedError && error.code !== 'NOPERM' && error.code !== 'READONLY';
}
