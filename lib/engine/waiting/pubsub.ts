import type { Cluster, Redis } from 'ioredis';
import { LockOptionsError } from '../errors';
import { ioredisKeyPrefix } from '../redis/redis-client';
import { followSocketAge, socketSince } from '../redis/connection-mark';

/**
 * The pub/sub side of a deployment, as the waiters need it. Channels are named as Redis knows them:
 * with the lock connection's ioredis keyPrefix, if it has one (the scripts publish on channels named
 * after their keys, which ioredis prefixes).
 */
export interface PubSub {
  subscribe(channel: string): Promise<unknown>;
  unsubscribe(channel: string): Promise<unknown>;
  /**
   * `onMessage` for every unlock message, with when the socket it came on became ready (monotonicNow;
   * undefined when not known: a Cluster's); `onReady` whenever the connection is (again) ready.
   */
  listen(onMessage: (channel: string, message: string, socketSince?: number) => void, onReady: () => void): void;
  close(): Promise<void>;
  /** The subscriber connection's state (ioredis `status`), for health checks. */
  readonly status?: string;
}

/**
 * Pub/sub on one dedicated ioredis connection. Classic SUBSCRIBE by default; sharded SSUBSCRIBE
 * (Redis 7) keeps a Cluster's notifications on the lock's own slot instead of broadcasting them.
 */
export class RedisPubSub implements PubSub {
  private pendingReady?: Promise<void>;
  /** ioredis puts this connection's keyPrefix before a sharded channel (a key to it), not a classic one. */
  private readonly shardedPrefix: string;

  constructor(
    private readonly connection: Redis | Cluster,
    private readonly sharded: boolean,
    /** Whether close() should disconnect it (false when the user lent us the connection). */
    private readonly owned: boolean,
  ) {
    // A failing subscriber reconnects by itself; without a listener ioredis would print every error.
    connection.on('error', () => undefined);
    this.shardedPrefix = sharded ? ioredisKeyPrefix(connection) : '';
    followSocketAge(connection);
  }

  /**
   * When the subscriber's socket became ready (monotonicNow), if its reconnects are followed (not a
   * Cluster's): a message comes on the socket that is current when it is heard.
   */
  get socketSince(): number | undefined {
    return this.connection.isCluster ? undefined : socketSince(this.connection as Redis);
  }

  /** Drops the subscriber's socket and connects afresh (resubscribing), if this connection is ours. */
  reconnect(): void {
    if (this.owned && !this.connection.isCluster && this.connection.status === 'ready')
      this.connection.disconnect(true);
  }

  async subscribe(channel: string): Promise<unknown> {
    // Never SUBSCRIBE before 'ready': queued ahead of ioredis's ready check (INFO), it would put
    // the connection in subscriber mode, fail the check, and the reconnect would not resubscribe.
    await this.ready();
    return this.sharded ? this.connection.ssubscribe(this.asSent(channel)) : this.connection.subscribe(channel);
  }

  get status(): string {
    return this.connection.status;
  }

  unsubscribe(channel: string): Promise<unknown> {
    return this.sharded ? this.connection.sunsubscribe(this.asSent(channel)) : this.connection.unsubscribe(channel);
  }

  /**
   * Throws unless every channel named after a key of the lock connection (ioredis keyPrefix
   * `lockConnectionPrefix`) can be subscribed here: ioredis puts this connection's own keyPrefix
   * before a sharded channel, so it must begin the lock connection's.
   */
  checkChannelPrefix(lockConnectionPrefix: string): void {
    if (lockConnectionPrefix.startsWith(this.shardedPrefix)) return;
    throw new LockOptionsError(
      `The subscriber connection's ioredis keyPrefix "${this.shardedPrefix}" does not begin the lock connection's ` +
        `("${lockConnectionPrefix}"), so it could not hear the lock's releases: give both the same keyPrefix.`,
    );
  }

  /** A sharded channel as given to ioredis, which puts this connection's keyPrefix back (see checkChannelPrefix). */
  private asSent(channel: string): string {
    return channel.slice(this.shardedPrefix.length);
  }

  listen(onMessage: (channel: string, message: string, socketSince?: number) => void, onReady: () => void): void {
    this.connection.on(this.sharded ? 'smessage' : 'message', (channel: string, message: string) =>
      onMessage(channel, message, this.socketSince),
    );
    // Every 'ready' (ioredis has resubscribed by then): a release published while the connection was
    // down or not yet up is lost, so every waiter retries.
    this.connection.on('ready', onReady);
    // A Cluster stays 'ready' through a shard's failover; its sharded subscribers move to the promoted
    // master and resubscribe, then say so: a release published meanwhile may be lost, so retry too.
    if (this.sharded) this.connection.on('subscribersReady', onReady);
  }

  async close(): Promise<void> {
    if (!this.owned) return;
    // QUIT only a live connection: on one that is reconnecting it would wait in the offline queue,
    // possibly forever (a dead server).
    if (this.connection.status === 'ready') await this.connection.quit().catch(() => undefined);
    this.connection.disconnect();
  }

  /** Resolves at the next 'ready' (one shared listener however many subscriptions wait for it). */
  private ready(): Promise<void> {
    const connection = this.connection;
    if (connection.status === 'ready') return Promise.resolve();
    if (connection.status === 'wait') void connection.connect().catch(() => undefined);
    this.pendingReady ??= new Promise((resolve) =>
      connection.once('ready', () => {
        this.pendingReady = undefined;
        resolve();
      }),
    );
    return this.pendingReady;
  }
}
