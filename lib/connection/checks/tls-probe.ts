import * as net from 'node:net';
import Redis from 'ioredis';
import * as tls from 'node:tls';
import type { ConnectionOptions as TlsConnectionOptions } from 'node:tls';

/** A node a deployment dials, with the TLS options it uses there (see BaseDeployment.tlsTargets). */
export interface TlsTarget {
  host: string;
  port: number;
  /** undefined: plain text (a sentinel's, while the nodes speak TLS). */
  tls?: TlsConnectionOptions;
  /** Set for a sentinel: how to ask it for the master, and how the master is reached. */
  sentinel?: SentinelFacts;
}

export interface SentinelFacts {
  masterName: string;
  username?: string;
  password?: string;
  /** The nodes' TLS options; undefined: they speak plain text. */
  masterTls?: TlsConnectionOptions;
}

/** The master `sentinel` names, or undefined when it does not answer in time. */
export async function masterNamedBy(target: TlsTarget, timeoutMs: number): Promise<TlsTarget | undefined> {
  const facts = target.sentinel;
  if (!facts) return undefined;
  const sentinel = new Redis({
    host: target.host,
    port: target.port,
    tls: target.tls,
    username: facts.username,
    password: facts.password,
    lazyConnect: true,
    enableOfflineQueue: false,
    enableReadyCheck: false,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    connectTimeout: timeoutMs,
    commandTimeout: timeoutMs,
  });
  sentinel.on('error', () => undefined);
  try {
    await sentinel.connect();
    const reply = (await sentinel.call('SENTINEL', 'get-master-addr-by-name', facts.masterName)) as string[] | null;
    return reply ? { host: reply[0], port: Number(reply[1]), tls: facts.masterTls } : undefined;
  } catch {
    return undefined;
  } finally {
    sentinel.disconnect();
  }
}

/**
 * One TLS handshake with `target`, then a PING, and the error that ended it, if any; undefined when
 * the server answered or nothing happened within `timeoutMs`. A server that takes no handshake but
 * answers a PING in plain text gets an error of its own (PLAIN_TEXT_ANSWER). ioredis swallows a
 * sentinel's TLS error and reports a Cluster node's as "Connection is closed", and under TLS 1.3 a
 * refused client certificate arrives after the handshake, where its ready check may fail first with
 * a plain "Stream isn't writeable": a handshake of our own sees the error itself.
 */
export async function tlsHandshakeError(target: TlsTarget, timeoutMs: number): Promise<Error | undefined> {
  if (target.tls === undefined) return undefined;
  const outcome = await exchange(tls.connect({ ...target.tls, host: target.host, port: target.port }), timeoutMs);
  if (outcome === 'answered') return undefined;
  if (outcome !== 'silent') return outcome;
  // No handshake at all: a server that speaks plain text waits for the end of a line that never comes.
  const plain = await exchange(net.connect({ host: target.host, port: target.port }), timeoutMs);
  return plain === 'answered' ? new Error(PLAIN_TEXT_ANSWER) : undefined;
}

/** What tlsHandshakeError reports for a server that answers a plain-text PING (refused-tls.ts knows its words). */
const PLAIN_TEXT_ANSWER = 'the server answered a plain-text PING: it does not speak TLS on this port';

/**
 * Sends PING once `socket` is connected (after its handshake, for TLS) and reports how it went: the
 * error that ended it, 'answered' for a Redis reply (PONG, NOAUTH: the connection was taken),
 * 'silent' for none within `timeoutMs`. A TLS server's alert arrives instead of a reply when it refuses.
 */
function exchange(socket: net.Socket, timeoutMs: number): Promise<Error | 'answered' | 'silent'> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => done('silent'), timeoutMs);
    timer.unref();
    function done(outcome: Error | 'answered' | 'silent'): void {
      clearTimeout(timer);
      socket.removeAllListeners();
      socket.on('error', () => undefined); // a late alert must not become an unhandled error
      socket.destroy();
      resolve(outcome);
    }
    socket.once('error', done);
    socket.once(socket instanceof tls.TLSSocket ? 'secureConnect' : 'connect', () => socket.write('PING\r\n'));
    // A Redis reply (a TLS server's alert record, which starts with byte 0x15, is no answer to a plain PING).
    socket.once('data', (data: Buffer) => done(/^[+-]/.test(data.toString('latin1', 0, 1)) ? 'answered' : 'silent'));
    socket.once('close', () => done('silent'));
  });
}
