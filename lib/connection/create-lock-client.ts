import { bounded } from '../engine/redis/bounded';
import { LockError, RedisUnavailableError } from '../engine/errors';
import { DEFAULT_OPERATION_TIMEOUT, engineOf, LockClient, type LockClientOptions } from '../engine/client/lock-client';
import { checkDuration, MAX_TIMEOUT_MS, TIMEOUT_RULE } from '../engine/util/validation';
import { checkChannelAccess } from './channel-access';
import type { ConnectionOptions } from './connection-options';
import { createDeployment, isRedisDeployment } from './deployments/create-deployment';
import { connectionProblem, warnWhenRefused } from './checks/refused-settings';
import { describeConnection } from './describe-connection';
import type { RedisDeployment } from './deployments/redis-deployment';

/** Everything a LockClient takes besides its connections. */
export type LockClientSettings = Omit<
  LockClientOptions,
  'redis' | 'pubsub' | 'publishCommand' | 'onClose' | 'connectionProblem'
>;

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
  const deployment = deploymentFor(connection);
  try {
    await connectWithin(deployment, connectTimeout(settings.operationTimeout));
    return await checkedLockClientOver(deployment, settings);
  } catch (error) {
    const cause = causeOf(error, deployment);
    await deployment.close().catch(() => undefined);
    // A configuration problem (e.g. master-slave's ROLE check) says so itself; anything else means
    // Redis could not be reached: say where.
    if (error instanceof LockError && !(error instanceof RedisUnavailableError)) throw error;
    const timeout = connectTimeout(settings.operationTimeout);
    throw new RedisUnavailableError(undefined, 'connect', timeout, cause, describeConnection(connection));
  }
}

/** The deployment given, or a new one for the options. */
export function deploymentFor(connection: ConnectionOptions | RedisDeployment): RedisDeployment {
  return isRedisDeployment(connection) ? connection : createDeployment(connection);
}

/**
 * Connects and verifies `deployment` within `timeout`. It rides out failed attempts meanwhile (Redis
 * still starting, a sentinel failover under way), and a server that accepts the connection but
 * never answers does not hang start-up.
 */
export function connectWithin(deployment: RedisDeployment, timeout: number): Promise<void> {
  return bounded(deployment.ready(), timeout, { name: 'connect' });
}

/** A LockClient on the deployment's connections; closing it closes them. */
export function lockClientOver(deployment: RedisDeployment, settings: LockClientSettings): LockClient {
  const client = new LockClient({
    ...settings,
    redis: deployment.client,
    pubsub: deployment.pubsub,
    publishCommand: deployment.publishCommand,
    onClose: () => deployment.close(),
    connectionProblem: () => connectionProblem(deployment.lastConnectionError?.()),
  });
  warnWhenRefused(deployment.client, engineOf(client).logger);
  return client;
}

/**
 * lockClientOver, once the deployment's Redis user is seen to reach the lock channels
 * (checkChannelAccess); if not, the client is closed again and the refusal thrown.
 */
async function checkedLockClientOver(deployment: RedisDeployment, settings: LockClientSettings): Promise<LockClient> {
  const client = lockClientOver(deployment, settings);
  try {
    await checkChannelAccess(deployment, client.keyPrefix, client.operationTimeout);
    return client;
  } catch (error) {
    await client.close().catch(() => undefined);
    throw error;
  }
}

/** How long connecting (and verifying) a deployment may take: three operation timeouts (default 9 s). */
export function connectTimeout(operationTimeout: number | undefined): number {
  const operation = checkDuration('', 'operationTimeout', operationTimeout, TIMEOUT_RULE);
  return Math.min(MAX_TIMEOUT_MS, 3 * (operation ?? DEFAULT_OPERATION_TIMEOUT));
}

/** The connection's own error rather than our timeout's wrapper, when there is one. */
function causeOf(error: unknown, deployment: RedisDeployment): unknown {
  if (!(error instanceof RedisUnavailableError)) return error;
  if (error.cause !== undefined) return error.cause;
  return deployment.lastConnectionError?.() ?? error;
}
