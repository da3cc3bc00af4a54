import type { Redis } from 'ioredis';
import type { RedisClient } from './redis-client';
import { nodeForKey } from './replica-sync';

/**
 * The connection a key's commands travel on at one moment: the node that serves the key and that
 * node's socket. A reconnect (to the same address or, after a failover, to another master) gives the
 * node a new socket, and a new slot map may give the key another node: either way the mark differs.
 */
export interface ConnectionMark {
  readonly node: Redis;
  readonly socket: unknown;
}

/** The mark of the connection `key`'s commands go on now; undefined while it is not ready. */
export function connectionMark(redis: RedisClient, key: string): ConnectionMark | undefined {
  const node = nodeForKey(redis, key);
  if (!node || node.status !== 'ready') return undefined;
  return { node, socket: node.stream };
}

/**
 * Whether `key`'s commands still travel on the connection `mark` was taken of: the same node, on the
 * same socket, so that every reply since came from the server that answered then.
 */
export function sameConnection(mark: ConnectionMark, redis: RedisClient, key: string): boolean {
  const now = connectionMark(redis, key);
  return now !== undefined && now.node === mark.node && now.socket === mark.socket;
}
