import type { Cluster, Redis } from 'ioredis';
import { reconnectDelay } from './redis-options';

type Connection = Redis | Cluster;

/** Connections this library is closing (quitAll): their 'end' is expected. */
const closing = new WeakSet<Connection>();
const revived = new WeakSet<Connection>();

/**
 * Connects lazily created connections (no-op for ones already connecting or ready). Connection
 * errors surface as rejected commands and RedisUnavailableError; the listener only keeps ioredis
 * from printing each reconnect failure as an "Unhandled error event".
 */
export async function connectAll(connections: Connection[]): Promise<void> {
  for (const c of connections) {
    if (c.listenerCount('error') === 0) c.on('error', () => undefined);
    reviveWhenEnded(c);
  }
  await Promise.all(connections.map((c) => (c.status === 'wait' ? c.connect() : undefined)));
}

/** Closes connections politely (QUIT), then makes sure nothing of theirs stays open. */
export async function quitAll(connections: Connection[]): Promise<void> {
  await Promise.all(
    connections.map(async (c) => {
      closing.add(c);
      // QUIT only a live connection (on a reconnecting one it could wait for a dead server forever).
      if (c.status === 'ready') await c.quit().catch(() => undefined);
      // QUIT leaves side connections open (a sentinel client's failover detector): close those too.
      c.disconnect();
    }),
  );
}

/**
 * Connects again, with the usual back-off, a connection that ended without this library closing it.
 * ioredis ends a connection for good ('end', no reconnect) when its connector fails a connect
 * instead of handing over a socket: a sentinel client whose connect is cut short (its failover
 * detector disconnects it mid-resolve, or its sentinel retry strategy gives up) would leave this
 * process unable to lock while every other recovers.
 */
function reviveWhenEnded(connection: Connection): void {
  if (revived.has(connection)) return;
  revived.add(connection);
  let attempt = 0;
  connection.on('ready', () => (attempt = 0));
  connection.on('end', () => {
    if (closing.has(connection)) return;
    setTimeout(() => {
      if (closing.has(connection) || connection.status !== 'end') return;
      connection.connect().catch(() => undefined); // a failure ends it again: the next attempt backs off
    }, reconnectDelay(++attempt)).unref();
  });
}
