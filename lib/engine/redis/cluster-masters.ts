import type { Cluster, Redis } from 'ioredis';

/** The masters a slot-map refresh left the client with, as one comparable text. */
function mastersOf(cluster: Cluster): string {
  return cluster
    .nodes('master')
    .map((node) => `${node.options.host}:${node.options.port}`)
    .sort()
    .join(' ');
}

/**
 * Calls `onChange` when a Cluster's masters change under the client: a slot-map refresh finds another
 * set of masters (a shard failed over: its slots went to a replica the client knew all along, so no
 * new connection tells of it), or a master's connection is ready again after a drop (a restart, maybe
 * empty). Either way a grant or renewal sent before may be lost, as when a standalone client
 * reconnects, and the client does what it does then (see LockClient.onReady). Returns what stops
 * following.
 */
export function followClusterMasters(cluster: Cluster, onChange: () => void): () => void {
  let masters = mastersOf(cluster);
  // New masters whose connection was being made when the refresh named them: without an offline
  // queue, a command sent to one now is refused, so the change is told once it is ready. (One never
  // connected, 'wait', connects for the first command sent to it.)
  const awaited = new Set<Redis>();
  const onRefresh = (): void => {
    const now = mastersOf(cluster);
    if (now === masters) return;
    masters = now;
    for (const node of cluster.nodes('master')) {
      if (node.status !== 'ready' && node.status !== 'wait') awaited.add(node);
    }
    if (awaited.size === 0) onChange();
  };
  const readyHandlers = new Map<Redis, () => void>();
  const follow = (node: Redis): void => {
    if (readyHandlers.has(node)) return;
    // A node's first ready is its first connection (made when first needed): only a later one is a drop.
    let connected = node.status === 'ready';
    const onReady = (): void => {
      const dropped = connected && cluster.nodes('master').includes(node);
      connected = true;
      if (awaited.delete(node) || dropped) onChange();
    };
    readyHandlers.set(node, onReady);
    node.on('ready', onReady);
  };
  const unfollow = (node: Redis): void => {
    const onReady = readyHandlers.get(node);
    if (onReady) node.off('ready', onReady);
    readyHandlers.delete(node);
    awaited.delete(node);
  };
  cluster.nodes('all').forEach(follow);
  cluster.on('+node', follow);
  cluster.on('-node', unfollow);
  cluster.on('refresh', onRefresh);
  return () => {
    cluster.off('+node', follow);
    cluster.off('-node', unfollow);
    cluster.off('refresh', onRefresh);
    [...readyHandlers.keys()].forEach(unfollow);
  };
}
