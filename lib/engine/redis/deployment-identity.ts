import type { Cluster, Redis } from 'ioredis';
import type { RedisClient } from './redis-client';

/** ioredis's defaults for an address it was given without host or port. */
const SERVER_DEFAULTS = { host: 'localhost', port: 6379 };
const SENTINEL_DEFAULTS = { host: 'localhost', port: 26379 };
const CLUSTER_NODE_DEFAULTS = { host: '127.0.0.1', port: 6379 };

type Address = { host?: string | null; port?: number | string | null };

/** Clusters whose startup nodes cannot be read (see clusterIdentity). */
const unreadableClusters = new WeakMap<Cluster, string>();
let unreadableCount = 0;

/**
 * Which Redis deployment a client's commands reach, as text that every process configured alike
 * computes the same, with no Redis call: a server's address (or socket) and database, a sentinel
 * group's master name, sentinels and database, or a Cluster's startup nodes. MultiLock orders locks
 * of the same key on different deployments by it, and takes a lock given twice through two clients
 * of one deployment once. Addresses are compared as configured: a process that names a server
 * `localhost` and another that names it `127.0.0.1` see two deployments.
 */
export function deploymentIdentity(redis: RedisClient): string {
  if (redis.isCluster) return clusterIdentity(redis as Cluster);
  const { sentinels, name, path, host, port, db } = (redis as Redis).options;
  const database = `/${db ?? 0}`;
  if (sentinels && sentinels.length > 0) {
    const group = sentinels.map((s) => addressText(s, SENTINEL_DEFAULTS)).sort();
    return `sentinel ${name} at ${group.join(',')}${database}`;
  }
  if (path) return `unix ${path}${database}`;
  return `server ${addressText({ host, port }, SERVER_DEFAULTS)}${database}`;
}

/**
 * A Cluster is one keyspace whichever node answers: its startup nodes, sorted, name it. ioredis keeps
 * them in a field its typings mark private; should that ever change, each such client is a
 * deployment of its own: never two clusters taken for one, though processes may then order the same
 * key on two clusters differently.
 */
function clusterIdentity(cluster: Cluster): string {
  const nodes = (cluster as unknown as { startupNodes?: unknown }).startupNodes;
  if (!Array.isArray(nodes)) {
    let identity = unreadableClusters.get(cluster);
    if (!identity) unreadableClusters.set(cluster, (identity = `cluster #${++unreadableCount}`));
    return identity;
  }
  return `cluster ${nodes.map(startupNodeText).sort().join(',')}`;
}

/** A startup node as ioredis takes one: a port, a `host:port` or URL text, or an address object. */
function startupNodeText(node: unknown): string {
  if (typeof node === 'number') return addressText({ port: node }, CLUSTER_NODE_DEFAULTS);
  if (typeof node === 'string') return node.trim().toLowerCase();
  return addressText((node ?? {}) as Address, CLUSTER_NODE_DEFAULTS);
}

function addressText({ host, port }: Address, defaults: { host: string; port: number }): string {
  const h = (host || defaults.host).toLowerCase();
  return `${h.includes(':') ? `[${h}]` : h}:${Number(port || defaults.port)}`;
}
