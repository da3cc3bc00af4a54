import { monotonicNow } from '../../engine/util/clock';
import type { ConnectionConfigError } from '../../engine/errors';
import { isError } from '../../engine/errors/is-error';
import type { LockLogger } from '../../engine/util/logger';
import type { RedisClient } from '../../engine/redis/redis-client';
import { refusedCredentials } from './refused-credentials';
import { refusedTls } from './refused-tls';

/**
 * The configuration error for `error` when it is Redis refusing a connection's settings: its
 * credentials (refused-credentials.ts) or its TLS (refused-tls.ts); undefined for any other error.
 */
export function refusedSettings(error: unknown): ConnectionConfigError | undefined {
  return refusedCredentials(error) ?? refusedTls(error);
}

/**
 * A connection error in words for an operator: what to fix when Redis refused the connection's
 * settings, else the error's own message; undefined for no error.
 */
export function connectionProblem(error: Error | undefined): string | undefined {
  if (!isError(error)) return undefined;
  return refusedSettings(error)?.problems.join('; ') ?? error.message;
}

/** A refusal is warned of at most this often while it repeats (every reconnect attempt meets it). */
const REFUSAL_WARNING_INTERVAL_MS = 60_000;

/**
 * Warns when Redis refuses the lock connection's settings as it reconnects (a password or client CA
 * rotated on the server while the application runs): retried like an outage, it would otherwise show
 * only as locks that time out. Once per distinct refusal, and again a minute later if it goes on.
 */
export function warnWhenRefused(connection: RedisClient, logger: LockLogger): void {
  let last: { text: string; at: number } | undefined;
  connection.on('error', (error: Error) => {
    const text = refusedSettings(error)?.problems.join('; ');
    if (text === undefined) return;
    if (last?.text === text && monotonicNow() - last.at < REFUSAL_WARNING_INTERVAL_MS) return;
    last = { text, at: monotonicNow() };
    logger.warn(`Redis refuses the lock connection as it reconnects: ${text}`);
  });
}
