import type { Cluster, Redis } from 'ioredis';
import { RedisPubSub } from '../../engine/waiting/pubsub';
import { handleResubscribeRejections } from '../../engine/waiting/resubscribe-rejections';
import type { HostPort } from '../connection-options';
import { DEFAULT_REDIS_PORT } from '../addresses';
import { connectAll, lastConnectionError, quitAll } from '../connection-revival';
import { tlsRefusalWhile } from '../checks/refused-tls';
import type { TlsTarget } from '../checks/tls-probe';
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
  /** Where TLS is spoken, for telling why connecting fails (see tlsRefusalWhile); default from `client`'s options. */
  tlsTargets?: readonly TlsTarget[];
}

/**
 * What every deployment strategy shares (ioredis's AbstractConnector, for us): a command connection
 * and a subscriber that it connects (with error handling and revival, connection-revival.ts) and closes
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
  private readonly tlsTargets: readonly TlsTarget[];

  protected constructor({
    client,
    subscriber,
    replicas = [],
    owned = [client, subscriber],
    tlsTargets,
  }: DeploymentConnections<C>) {
    this.client = client;
    this.owned = owned;
    this.tlsTargets = tlsTargets ?? (client.isCluster ? [] : tlsTargetsOf(client as Redis));
    this.replicas = replicas;
    this.publishCommand = client.isCluster ? 'spublish' : 'publish';
    // Closed by us, possibly mid-reconnect: ioredis's own re-subscription must not reject unhandled.
    if (owned.includes(subscriber)) handleResubscribeRejections(subscriber);
    this.pubsub = new RedisPubSub(subscriber, client.isCluster, false);
  }

  /**
   * Connects both connections, then verifies the deployment; a failed check closes them again.
   * Failed connection attempts are retried until both are ready: the caller bounds the wait.
   */
  async ready(): Promise<void> {
    const connecting = connectAll([...this.owned]);
    // A TLS setting Redis refuses fails now, whether or not the connections' own errors show it.
    await Promise.race([connecting, tlsRefusalWhile(connecting, this.tlsTargets)]);
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

/** ioredis's defaults for an address that leaves them out. */
const DEFAULT_HOST = 'localhost';
const DEFAULT_SENTINEL_PORT = 26379;

/**
 * A server's address and TLS options; or a sentinel client's sentinels and theirs, with how to reach
 * the master they name; none without TLS.
 */
function tlsTargetsOf(client: Redis): TlsTarget[] {
  const { options } = client;
  if (options.sentinels) {
    const masterTls = options.enableTLSForSentinelMode ? options.tls : undefined;
    if (!options.sentinelTLS && !masterTls) return [];
    const sentinel = {
      masterName: options.name ?? '',
      username: options.sentinelUsername ?? undefined,
      password: options.sentinelPassword ?? undefined,
      masterTls,
    };
    return options.sentinels.map(({ host, port }) => ({
      host: host ?? DEFAULT_HOST,
      port: port ?? DEFAULT_SENTINEL_PORT,
      tls: options.sentinelTLS,
      sentinel,
    }));
  }
  return options.tls
    ? [{ host: options.host ?? DEFAULT_HOST, port: options.port ?? DEFAULT_REDIS_PORT, tls: options.tls }]
    : [];
}
