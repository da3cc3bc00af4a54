import Redis from 'ioredis';
import { BaseDeployment } from './base-deployment';
import type { SentinelConnectionOptions } from '../connection-options';
import { DEFAULT_COMMAND_TIMEOUT, lockConnectionOptions, SUBSCRIBER_OVERRIDES, tlsOptions } from '../redis-options';

/**
 * A sentinel-managed master. Both connections ask the sentinels for the master, and watch the
 * sentinels' `+switch-master` (ioredis `failoverDetector`), so after a failover commands and
 * subscriptions move to the promoted replica at once, even when the old master is frozen rather
 * than gone; the waiters then retry (reconnect = wake everyone).
 */
export class SentinelDeployment extends BaseDeployment<Redis> {
  readonly type = 'sentinel' as const;

  constructor(options: SentinelConnectionOptions) {
    const nodeOptions = lockConnectionOptions(options);
    const connection = {
      ...nodeOptions,
      sentinels: options.sentinels,
      name: options.masterName,
      sentinelUsername: options.sentinelUsername,
      sentinelPassword: options.sentinelPassword,
      // ioredis ignores `tls` in sentinel mode (a plain connection to a TLS master fails its handshake
      // forever) unless told to use it for the nodes; the sentinels have TLS options of their own.
      enableTLSForSentinelMode: nodeOptions.tls !== undefined,
      sentinelTLS: options.sentinelTls === undefined ? nodeOptions.tls : tlsOptions(options.sentinelTls),
      failoverDetector: true,
      sentinelCommandTimeout: options.commandTimeout ?? DEFAULT_COMMAND_TIMEOUT,
      // Fresh sentinel answers on every reconnect, so a demoted master is not reused.
      sentinelMaxConnections: 3,
    };
    super({ client: new Redis(connection), subscriber: new Redis({ ...connection, ...SUBSCRIBER_OVERRIDES }) });
  }
}
