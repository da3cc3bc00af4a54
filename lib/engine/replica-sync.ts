import type { Cluster, Redis } from 'ioredis';
import { clusterSlot } from './cluster-slot';
import { durationProblem, show } from './durations';
import type { RedisClient } from './redis-client';

/**
 * After Redisson's synced-replicas check: once a lock is written, WAIT until `replicas` replicas
 * have it (or `timeout` ms pass). It narrows, but does not close, the failover window: Redis
 * replication stays asynchronous, and a replica that acknowledged can still lose the write if it
 * is not the one promoted.
 */
export interface ReplicaSyncOptions {
  /** Replicas that must acknowledge each acquisition. */
  replicas: number;
  /** How long to wait for them, in ms. */
  timeout: number;
  /** 'release' (default): release and throw ReplicaSyncError; 'warn': keep the lock, log a warning. */
  onFailure?: 'release' | 'warn';
}

/** Everything wrong with `sync` as replica-sync options, each naming the field (one rule for the engine and Nest). */
export function replicaSyncProblems(sync: unknown): string[] {
  if (sync === null || typeof sync !== 'object') {
    return [`replicaSync must be an object such as { replicas: 1, timeout: 100 }, got ${show(sync)}`];
  }
  const { replicas, timeout, onFailure } = sync as Partial<ReplicaSyncOptions>;
  const problems: string[] = [];
  if (!Number.isInteger(replicas) || (replicas as number) < 1) {
    problems.push(`replicaSync.replicas must be a positive integer, got ${show(replicas)}`);
  }
  if (timeout === undefined) problems.push('replicaSync.timeout is required (ms)');
  else {
    const problem = durationProblem('replicaSync.timeout', timeout, { positive: true });
    if (problem) problems.push(problem);
  }
  if (onFailure !== undefined && onFailure !== 'release' && onFailure !== 'warn') {
    problems.push(`replicaSync.onFailure must be 'release' or 'warn', got ${show(onFailure)}`);
  }
  return problems;
}

/** Runs WAIT on the node that holds `key` and returns how many replicas acknowledged. */
export async function waitForReplicas(
  client: RedisClient,
  key: string,
  replicas: number,
  timeout: number,
): Promise<number> {
  const node = client.isCluster ? masterForKey(client as Cluster, key) : (client as Redis);
  return (await node.call('WAIT', replicas, timeout)) as number;
}

function masterForKey(cluster: Cluster, key: string): Redis {
  const [masterKey] = cluster.slots[clusterSlot(key)] ?? [];
  const node = cluster.nodes('master').find((n) => `${n.options.host}:${n.options.port}` === masterKey);
  if (!node) throw new Error(`No cluster master known for key "${key}" (slot ${clusterSlot(key)}).`);
  return node;
}
