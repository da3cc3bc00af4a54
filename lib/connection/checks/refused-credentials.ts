import { ConnectionConfigError } from '../../engine/errors';
import { isError } from '../../engine/errors/is-error';

/**
 * Redis's answers to credentials it will not take: a wrong password or user (WRONGPASS; "invalid
 * password" before Redis 6), or none given where one is required (NOAUTH). Waiting does not fix
 * them, so connecting stops at the first one instead of retrying until its deadline.
 */
const REFUSED = /\b(WRONGPASS|NOAUTH)\b|\binvalid (password|username-password pair)\b/;

/** ioredis reports a sentinel's refusal inside its own error ("All sentinels are unreachable… Last error: …"). */
export const FROM_SENTINELS = /^All sentinels are unreachable/;

/**
 * The configuration error to fail a start-up with when `error`, reported by a connection, is Redis
 * refusing its credentials; undefined for any other error (those are retried).
 */
export function refusedCredentials(error: unknown): ConnectionConfigError | undefined {
  const messages = errorMessages(error);
  const refused = messages.find((m) => REFUSED.test(m));
  if (refused === undefined) return undefined;
  const reply = refused.slice(refused.search(REFUSED));
  const fix = messages.some((m) => FROM_SENTINELS.test(m))
    ? 'The sentinels refused the credentials: check sentinelUsername and sentinelPassword (REDIS_SENTINEL_USERNAME, REDIS_SENTINEL_PASSWORD)'
    : /\bNOAUTH\b/.test(reply)
      ? 'Redis requires a password: give password, and username for an ACL user (REDIS_PASSWORD, REDIS_USERNAME)'
      : 'Redis refused the username and password: check username and password (REDIS_USERNAME, REDIS_PASSWORD)';
  return new ConnectionConfigError([`${fix}; Redis said: ${reply}`]);
}

/** The error's message, and those of what it wraps (a Cluster's last node error, a cause). */
export function errorMessages(error: unknown, depth = 0): string[] {
  if (!isError(error) || depth > 3) return [];
  const inner = error as Error & { lastNodeError?: unknown; cause?: unknown };
  return [error.message, ...errorMessages(inner.lastNodeError, depth + 1), ...errorMessages(inner.cause, depth + 1)];
}
