import type { Cluster, ClusterOptions, Redis, RedisOptions } from 'ioredis';

/** The four Redis deployments a lock client can run on (seed 001's `deployType`). */
export type DeployType = 'single' | 'master-slave' | 'sentinel' | 'cluster';
export const DEPLOY_TYPES: readonly DeployType[] = ['single', 'master-slave', 'sentinel', 'cluster'];

export interface HostPort {
  host: string;
  port: number;
}

/** Settings every created connection shares. */
export interface CommonConnectionOptions {
  username?: string;
  password?: string;
  /** Database index (not for cluster). */
  db?: number;
  /** true, or Node TLS options, to connect over TLS. */
  tls?: boolean | NonNullable<RedisOptions['tls']>;
  /**
   * Per-command timeout in ms on the connections we create, so a frozen server (SIGSTOP, network
   * partition) fails commands instead of hanging them. Default 2000.
   */
  commandTimeout?: number;
  /** Extra ioredis options merged into every connection we create (ours win on conflicts). */
  redisOptions?: RedisOptions;
}

/** One server. */
export interface SingleConnectionOptions extends CommonConnectionOptions {
  type: 'single';
  /** `redis://[user:password@]host:port[/db]` or `rediss://…`; or give host and port. */
  url?: string;
  host?: string;
  port?: number;
}

/** A master with replicas: lock commands always go to the master. */
export interface MasterSlaveConnectionOptions extends CommonConnectionOptions {
  type: 'master-slave';
  master: HostPort;
  replicas: HostPort[];
}

/** Sentinel-managed master: the client follows failovers. */
export interface SentinelConnectionOptions extends CommonConnectionOptions {
  type: 'sentinel';
  sentinels: HostPort[];
  /** The monitored master's name, e.g. 'mymaster'. */
  masterName: string;
  sentinelUsername?: string;
  sentinelPassword?: string;
  /**
   * TLS to the sentinels themselves: true, or Node TLS options. Default: as `tls` (the master and
   * replicas), since a deployment that encrypts one usually encrypts both; false for sentinels that
   * take plain connections beside TLS nodes.
   */
  sentinelTls?: boolean | NonNullable<RedisOptions['tls']>;
}

/** Redis Cluster: scripts stay on one slot (hash tags); notifications use sharded pub/sub. */
export interface ClusterConnectionOptions extends CommonConnectionOptions {
  type: 'cluster';
  nodes: HostPort[];
  clusterOptions?: ClusterOptions;
}

/** A client you already have. You own its lifecycle: closing the lock client leaves it open. */
export interface ExistingClientOptions {
  type: 'client';
  client: Redis | Cluster;
  /** A connection for pub/sub; default: a duplicate of `client` (that one we own and close). */
  subscriber?: Redis | Cluster;
}

export type ConnectionOptions =
  | SingleConnectionOptions
  | MasterSlaveConnectionOptions
  | SentinelConnectionOptions
  | ClusterConnectionOptions
  | ExistingClientOptions;
