import { monotonicNow } from '../engine/util/clock';
import type { Cluster, Redis } from 'ioredis';
import { revivedAfterEnd } from '../engine/redis/connection-end';
import { reconnectDelay } from './redis-options';
import { refusedSettings } from './checks/refused-settings';

type Connection = Redis | Cluster;

/** Connections this library is closing (quitAll): their 'end' is expected. */
const closing = new WeakSet<Connection>();
const watched = new WeakSet<Connection>();
/** A connection's latest error, while it is not ready (cleared once it is). */
const lastErrors = new WeakMap<Connection, { error: Error; at: number; refusal: boolean }>();
/**
 * One failed attempt can report Redis's refusal and then the plain failure it causes (TLS 1.3: the
 * server's alert, then the ready check's "Stream isn't writeable"): within this long, the refusal stays
 * the one reported, since it says why.
 */
const SAME_ATTEMPT_MS = 1_000;

/**
 * Connects lazily created connections and resolves once every one is ready. A failed attempt is not
 * the end of it: a refused or dropped connection, a sentinel naming a master that has just died, a
 * ready check timed out on a busy server are what a deployment that is starting or failing over
 * looks like for a moment, and the connection tries again by itself (its retryStrategy, or the
 * revival below). The caller's deadline decides when to give up, and `lastConnectionError` says why.
 */
export async function connectAll(connections: Connection[]): Promise<void> {
  await Promise.all(connections.map(untilReady));
}

/** The latest error of the first of `connections` that is not ready, if any reported one. */
export function lastConnectionError(connections: readonly Connection[]): Error | undefined {
  for (const c of connections) if (c.status !== 'ready' && lastErrors.has(c)) return lastErrors.get(c)!.error;
  return undefined;
}

function untilReady(connection: Connection): Promise<void> {
  watch(connection);
  if (connection.status === 'ready') return Promise.resolve();
  const ready = new Promise<void>((resolve, reject) => {
    const onReady = () => {
      connection.off('error', onError);
      resolve();
    };
    // Credentials Redis refuses, or a TLS handshake that fails on its settings, stay so: fail now,
    // naming the option, not at the deadline.
    const onError = (error: Error) => {
      const refused = refusedSettings(error);
      if (!refused) return;
      connection.off('ready', onReady);
      connection.off('error', onError);
      reject(refused);
    };
    connection.once('ready', onReady);
    connection.on('error', onError);
  });
  // Its rejection is the first failed attempt, which the connection retries: not ours to report.
  if (connection.status === 'wait') connection.connect().catch(() => undefined);
  return ready;
}

/**
 * Listens once per connection: its errors are recorded (and so not printed by ioredis as an
 * "Unhandled error event" on every reconnect failure), and an end we did not ask for is revived.
 */
function watch(connection: Connection): void {
  if (watched.has(connection)) return;
  watched.add(connection);
  connection.on('error', (error: Error) => {
    const refusal = refusedSettings(error) !== undefined;
    const previous = lastErrors.get(connection);
    if (previous?.refusal && !refusal && monotonicNow() - previous.at < SAME_ATTEMPT_MS) return;
    lastErrors.set(connection, { error, at: monotonicNow(), refusal });
  });
  connection.on('ready', () => lastErrors.delete(connection));
  reviveWhenEnded(connection);
}

/** Closes connections politely (QUIT), then makes sure nothing of theirs stays open. */
export async function quitAll(connections: Connection[]): Promise<void> {
  await Promise.all(
    connections.map(async (c) => {
      closing.add(c);
      revivedAfterEnd(c, false);
      // QUIT only a live connection (on a reconnecting one it could wait for a dead server forever).
      if (c.status === 'ready') await c.quit().catch(() => undefined);
      absorbLateSocketErrors(c);
      // QUIT leaves side connections open (a sentinel client's failover detector): close those too.
      c.disconnect();
    }),
  );
}

/**
 * A TLS socket ended during its handshake can report a second error after the one ioredis listens
 * for once (the server's alert answering the client's abort): unheard, Node would throw it and end
 * the process. Closing a connection that is still connecting (a start-up that failed fast, a close
 * during a reconnect) must not do that, so its sockets get a listener that drops late errors.
 */
function absorbLateSocketErrors(connection: Connection): void {
  const nodes = connection.isCluster ? (connection as Cluster).nodes() : [connection as Redis];
  for (const node of nodes) node.stream?.on('error', () => undefined);
}

/**
 * Connects again, with the usual back-off, a connection that ended without this library closing it.
 * ioredis ends a connection for good ('end', no reconnect) when its connector fails a connect
 * instead of handing over a socket: a sentinel client whose connect is cut short (its failover
 * detector disconnects it mid-resolve, or its sentinel retry strategy gives up) would leave this
 * process unable to lock while every other recovers.
 */
function reviveWhenEnded(connection: Connection): void {
  revivedAfterEnd(connection, true);
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
