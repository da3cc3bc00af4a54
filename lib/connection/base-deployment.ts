import type { Cluster, Redis } from 'ioredis';
import { RedisPubSub } from '../engine/pubsub';
import type { HostPort } from './connection-options';
import { connectAll, lastConnectionError, quitAll } from './lifecycle';
import type { RedisDeployment } from './redis-deployment';

type Connection = Redis | Cluster;

/** The connections a deployment strategy makes, and what it knows of its replicas. */
export interface DeploymentConnections<C extends Connection> {
  /** Lock commands. */
  client: C;
  /** Pub/sub, with SUBSCRIBER_OVERRIDES. */
  subscriber: C;
  replicas?: readonly HostPort[];
  /** The ones this deployment opened, and so connects and closes; default both. */
  owned?: readonly C[];
}

/**
 * What every deployment strategy shares (ioredis's AbstractConnector, for us): a command connection
 * and a subscriber that it connects (with error handling and revival, lifecycle.ts) and closes
 * together; notifications by sharded pub/sub on a Cluster. A strategy only makes the connections
 * and, where there is something to check, overrides `verify()`.
 */
export abstract class BaseDeployment<C extends Connection = Connection> implements RedisDeployment {
  abstract readonly type: RedisDeployment['type'];
  readonly client: C;
  readonly pubsub: RedisPubSub;
  readonly publishCommand: 'publish' | 'spublish';
  readonly replicas: readonly HostPort[];
  protected readonly owned: readonly C[];

  protected constructor({ client, subscriber, replicas = [], owned = [client, subscriber] }: DeploymentConnections<C>) {
    this.client = client;
    this.owned = owned;
    this.replicas = replicas;
    this.publishCommand = client.isCluster ? 'spublish' : 'publish';
    this.pubsub = new RedisPubSub(subscriber, client.isCluster, false);
  }

  /**
   * Connects both connections, then verifies the deployment; a failed check closes them again.
   * Failed connection attempts are retried until both are ready: the caller bounds the wait.
   */
  async ready(): Promise<void> {
    await connectAll([...this.owned]);
    try {
      await this.verify();
    } catch (error) {
      await this.close();
      throw error;
    }
  }

  close(): Promise<void> {
    return quitAll([...this.owned]);
  }

  /** The latest error of a connection of ours that is not ready yet (see RedisDeployment). */
  lastConnectionError(): Error | undefined {
    return lastConnectionError(this.owned);
  }

  /** Throws when the connected deployment is not what the options promised. */
  protected async verify(): Promise<void> {}
}
