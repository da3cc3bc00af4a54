import { bounded } from '../engine/bounded';
import { checkDuration, MAX_TIMEOUT_MS } from '../engine/durations';
import { LockError, RedisUnavailableError } from '../engine/errors';
import { DEFAULT_OPERATION_TIMEOUT, LockClient, type LockClientOptions } from '../engine/lock-client';
import type { ConnectionOptions } from './connection-options';
import { createDeployment, isRedisDeployment } from './create-deployment';
import { describeConnection } from './describe-connection';
import type { RedisDeployment } from './redis-deployment';

/** Everything a LockClient takes besides its connections. */
export type LockClientSettings = Omit<LockClientOptions, 'redis' | 'pubsub' | 'publishCommand' | 'onClose'>;

export interface RedisLockClientOptions extends LockClientSettings {
  /** The deployment to connect to (or one you built). */
  connection: ConnectionOptions | RedisDeployment;
}

/**
 * Connects to a deployment (verifying it, e.g. master-slave's ROLE check) and returns a LockClient
 * that owns those connections: `close()` closes them, except a client you passed in.
 * @example
 * const locks = await createLockClient({ connection: { type: 'sentinel', sentinels, masterName: 'mymaster' } });
 */
export async function createLockClient(options: RedisLockClientOptions): Promise<LockClient> {
  const { connection, ...settings } = options;
  const deployment = isRedisDeployment(connection) ? connection : createDeployment(connection);
  try {
    // A server that accepts the connection but never answers must not hang the caller's start-up.
    const timeout = connectTimeout(settings.operationTimeout);
    await bounded(deployment.ready(), timeout, { name: 'connect' });
    return new LockClient({
      ...settings,
      redis: deployment.client,
      pubsub: deployment.pubsub,
      publishCommand: deployment.publishCommand,
      onClose: () => deployment.close(),
    });
  } catch (error) {
    await deployment.close().catch(() => undefined);
    // A configuration problem (e.g. master-slave's ROLE check) says so itself; anything else means
    // Redis could not be reached: say where.
    if (error instanceof LockError && !(error instanceof RedisUnavailableError)) throw error;
    const timeout = connectTimeout(settings.operationTimeout);
    throw new RedisUnavailableError(undefined, 'connect', timeout, unwrap(error), describeConnection(connection));
  }
}

/** How long connecting (and verifying) a deployment may take: three operation timeouts (default 9 s). */
export function connectTimeout(operationTimeout: number | undefined): number {
  const operation = checkDuration('', 'operationTimeout', operationTimeout, { positive: true });
  return Math.min(MAX_TIMEOUT_MS, 3 * (operation ?? DEFAULT_OPERATION_TIMEOUT));
}

/** The connection's own error rather than our timeout's wrapper, when there is one. */
function unwrap(error: unknown): unknown {
  return error instanceof RedisUnavailableError && error.cause instanceof Error ? error.cause : error;
}
