import { bounded } from '../engine/redis/bounded';
import { RedisRefusedError } from '../engine/errors';
import { ioredisKeyPrefix } from '../engine/redis/redis-client';
import type { RedisDeployment } from './deployments/redis-deployment';

/**
 * Checks at start-up that the connection's Redis user may publish and subscribe on the lock channels.
 * Redis 7 gives a new ACL user no channel at all (acl-pubsub-default resetchannels): such a user takes
 * and releases uncontended locks, and only the first wait fails. Better found before the first
 * contended key in production: throws RedisRefusedError (code NOPERM), naming the pattern to grant.
 *
 * The channel checked lies under the lock channels' prefix, and no lock uses it (every lock's channel
 * carries its `{name}` tag); nobody listens there.
 */
export async function checkChannelAccess(
  deployment: RedisDeployment,
  keyPrefix: string,
  operationTimeout: number,
): Promise<void> {
  const { client, pubsub, publishCommand } = deployment;
  // A client the user passed in may still be connecting, or find Redis down: its start-up does not wait
  // for Redis, and neither does this check. It runs where the lock connection is ready.
  if (client.status !== 'ready') return;
  const ioPrefix = ioredisKeyPrefix(client);
  const channel = `${ioPrefix}${keyPrefix}:channel-check`;
  const hint = `Grant the user the lock channels: &${ioPrefix}${keyPrefix}:* (Redis 7 gives new users none).`;
  const step = async (name: string, operation: () => Promise<unknown>) => {
    try {
      await bounded(operation(), operationTimeout, { name });
    } catch (error) {
      if (!(error instanceof RedisRefusedError) || error.code !== 'NOPERM') throw error;
      throw new RedisRefusedError(undefined, name, 'NOPERM', error.cause as Error, hint);
    }
  };
  // ioredis puts its keyPrefix before a sharded channel (a key to it), not before a classic one.
  const sent = publishCommand === 'spublish' ? channel.slice(ioPrefix.length) : channel;
  await step(publishCommand, () => client[publishCommand](sent, ''));
  await step('subscribe', () => pubsub.subscribe(channel));
  await step('unsubscribe', () => pubsub.unsubscribe(channel));
}
