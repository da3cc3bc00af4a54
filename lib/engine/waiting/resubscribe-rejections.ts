import type { Cluster, Redis } from 'ioredis';

/**
 * ioredis subscribes a reconnected connection's channels again by itself (autoResubscribe) and
 * handles nothing that call returns. Closed while its ready check is being answered (a client closed
 * mid-reconnect), or answered past commandTimeout (a frozen server), the connection rejects that
 * call, and an unhandled rejection ends a Node process. On a subscriber connection of ours, every
 * (S/P)SUBSCRIBE is handled here as well; a caller of our own still gets its rejection, since the
 * catch below is a branch of its own. (A Cluster's shard subscribers never reconnect by themselves.)
 */
export function handleResubscribeRejections(connection: Redis | Cluster): void {
  if (connection.isCluster) return;
  for (const name of ['subscribe', 'psubscribe', 'ssubscribe'] as const) {
    const call = (connection as Redis)[name].bind(connection) as (...args: unknown[]) => Promise<unknown>;
    Object.defineProperty(connection, name, {
      configurable: true,
      writable: true,
      value: (...args: unknown[]): Promise<unknown> => {
        const sent = call(...args);
        sent.catch(() => undefined);
        return sent;
      },
    });
  }
}
