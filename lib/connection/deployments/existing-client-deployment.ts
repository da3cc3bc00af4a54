import type { Cluster, Redis } from 'ioredis';
import { subscriberFor } from '../../engine/client/lock-client';
import { BaseDeployment } from './base-deployment';
import type { ExistingClientOptions } from '../connection-options';

/** A client the user made. We never close it; a subscriber we duplicated from it is ours. */
export class ExistingClientDeployment extends BaseDeployment<Redis | Cluster> {
  readonly type = 'client' as const;

  constructor(options: ExistingClientOptions) {
    const subscriber = options.subscriber ?? subscriberFor(options.client);
    super({ client: options.client, subscriber, owned: options.subscriber ? [] : [subscriber] });
  }

  /** The user connects their own client, and our duplicate of it connects as it is made. */
  override async ready(): Promise<void> {}
}
