import { LockClient, type LockClientOptions } from '../engine/lock-client';
import type { ConnectionOptions } from './connection-options';
import { createDeployment, isRedisDeployment } from './create-deployment';
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
    await deployment.ready();
    return new LockClient({
      ...settings,
      redis: deployment.client,
      pubsub: deployment.pubsub,
      publishCommand: deployment.publishCommand,
      onClose: () => deployment.close(),
    });
  } catch (error) {
    await deployment.close().catch(() => undefined);
    throw error;
  }
}
