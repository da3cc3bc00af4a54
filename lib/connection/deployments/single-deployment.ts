import Redis from 'ioredis';
import { DEFAULT_REDIS_PORT } from '../addresses';
import { BaseDeployment } from './base-deployment';
import type { SingleConnectionOptions } from '../connection-options';
import { lockConnectionOptions, SUBSCRIBER_OVERRIDES } from '../redis-options';

/** One server: a command connection and its subscriber duplicate. */
export class SingleDeployment extends BaseDeployment<Redis> {
  readonly type = 'single' as const;

  constructor(options: SingleConnectionOptions) {
    const redisOptions = lockConnectionOptions(options);
    const client = options.url
      ? new Redis(options.url, redisOptions)
      : new Redis({ host: options.host ?? '127.0.0.1', port: options.port ?? DEFAULT_REDIS_PORT, ...redisOptions });
    super({ client, subscriber: client.duplicate(SUBSCRIBER_OVERRIDES) });
  }
}
