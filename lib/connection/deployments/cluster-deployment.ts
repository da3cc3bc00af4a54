import { Cluster } from 'ioredis';
import { BaseDeployment } from './base-deployment';
import type { ClusterConnectionOptions } from '../connection-options';
import { lockConnectionOptions, reconnectDelay, SUBSCRIBER_OVERRIDES } from '../redis-options';

/**
 * Redis Cluster. Every script's keys share the lock's hash tag, so each runs on one slot; unlock
 * notifications use sharded pub/sub (SPUBLISH / SSUBSCRIBE, Redis 7), which stays on that slot's
 * shard instead of being broadcast to every node.
 */
export class ClusterDeployment extends BaseDeployment<Cluster> {
  readonly type = 'cluster' as const;

  constructor(options: ClusterConnectionOptions) {
    const { lazyConnect, enableOfflineQueue, ...redisOptions } = lockConnectionOptions(options);
    const clusterOptions = {
      // Learn of a shard's failover within a second, not at the next error or the 5 s default.
      slotsRefreshInterval: 1_000,
      clusterRetryStrategy: reconnectDelay,
      ...options.clusterOptions,
      redisOptions,
      lazyConnect,
      enableOfflineQueue,
      maxRedirections: 16,
      // No re-sending behind our back: a command whose connection closed may have run, and one ioredis
      // sends again after a CLUSTERDOWN may run after the caller gave up on it (a lock attempt then
      // runs twice: a re-entry nobody releases, held until its lease). The engine resolves such an
      // outcome itself (it asks whether the attempt was granted) and retries on its own terms.
      retryDelayOnFailover: 0,
      retryDelayOnClusterDown: 0,
      // Sharded subscriptions go to the node serving each channel's slot, and follow it on resharding.
      shardedSubscribers: true,
    };
    const { tls } = redisOptions;
    super({
      tlsTargets: tls ? options.nodes.map(({ host, port }) => ({ host, port, tls })) : [],
      client: new Cluster(options.nodes, clusterOptions),
      subscriber: new Cluster(options.nodes, {
        ...clusterOptions,
        ...SUBSCRIBER_OVERRIDES,
        redisOptions: { ...redisOptions, ...SUBSCRIBER_OVERRIDES },
      }),
    });
  }
}
