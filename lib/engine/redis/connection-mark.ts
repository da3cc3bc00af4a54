import type { Redis } from 'ioredis';
import { monotonicNow } from '../util/clock';
import type { RedisClient } from './redis-client';
import { nodeForKey } from './replica-sync';

/**
 * The connection a key's commands travel on at one moment: the node that serves the key and that
 * node's socket. A reconnect (to the same address or, after a failover, to another master) gives the
 * node a new socket, and a new slot map may give the key another node: either way the mark differs.
 * `since`: when that socket became ready (monotonicNow), for a connection whose reconnects this
 * process follows (see followSocketAge); undefined for a Cluster's node.
 */
export interface ConnectionMark {
  readonly node: Redis;
  readonly socket: unknown;
  readonly since?: number;
}

/** The socket each followed connection became ready on last, and when (monotonicNow). */
const socketAges = new WeakMap<Redis, { socket: unknown; since: number }>();
const followed = new WeakSet<Redis>();

/**
 * Follows when `redis`'s socket becomes ready, at every reconnect (a standalone or sentinel client: a
 * Cluster's nodes are not followed). Its first socket (ready already, or the first to be) counts as
 * older than any later one (-Infinity): the connections a client starts with are taken as reaching
 * the same server, as every client takes them, whichever was ready first.
 */
export function followSocketAge(redis: RedisClient): void {
  if (redis.isCluster || followed.has(redis as Redis)) return;
  const node = redis as Redis;
  followed.add(node);
  let first = true;
  const mark = (): void => {
    socketAges.set(node, { socket: node.stream, since: first ? -Infinity : monotonicNow() });
    first = false;
  };
  if (node.status === 'ready') mark();
  node.on('ready', mark);
}

/** When `node`'s current socket became ready, if its reconnects are followed (see followSocketAge). */
export function socketSince(node: Redis): number | undefined {
  const age = socketAges.get(node);
  return age && age.socket === node.stream ? age.since : undefined;
}

/** The mark of the connection `key`'s commands go on now; undefined while it is not ready. */
export function connectionMark(redis: RedisClient, key: string): ConnectionMark | undefined {
  const node = nodeForKey(redis, key);
  if (!node || node.status !== 'ready') return undefined;
  return { node, socket: node.stream, since: socketSince(node) };
}

/**
 * Whether `key`'s commands still travel on the connection `mark` was taken of: the same node, on the
 * same socket, so that every reply since came from the server that answered then.
 */
export function sameConnection(mark: ConnectionMark, redis: RedisClient, key: string): boolean {
  const now = connectionMark(redis, key);
  return now !== undefined && now.node === mark.node && now.socket === mark.socket;
}
