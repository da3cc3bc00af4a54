import type { Cluster, Redis } from 'ioredis';

/** The pub/sub side of a deployment, as the waiters need it. */
export interface PubSub {
  subscribe(channel: string): Promise<unknown>;
  unsubscribe(channel: string): Promise<unknown>;
  /** `onMessage` for every unlock message; `onReconnect` after the connection came back (not the first time). */
  listen(onMessage: (channel: string, message: string) => void, onReconnect: () => void): void;
  close(): Promise<void>;
}

/**
 * Pub/sub on one dedicated ioredis connection. Classic SUBSCRIBE by default; sharded SSUBSCRIBE
 * (Redis 7) keeps a Cluster's notifications on the lock's own slot instead of broadcasting them.
 */
export class RedisPubSub implements PubSub {
  constructor(
    private readonly connection: Redis | Cluster,
    private readonly sharded: boolean,
    /** Whether close() should disconnect it (false when the user lent us the connection). */
    private readonly owned: boolean,
  ) {}

  subscribe(channel: string): Promise<unknown> {
    return this.sharded ? this.connection.ssubscribe(channel) : this.connection.subscribe(channel);
  }

  unsubscribe(channel: string): Promise<unknown> {
    return this.sharded ? this.connection.sunsubscribe(channel) : this.connection.unsubscribe(channel);
  }

  listen(onMessage: (channel: string, message: string) => void, onReconnect: () => void): void {
    this.connection.on(this.sharded ? 'smessage' : 'message', onMessage);
    let connectedBefore = this.connection.status === 'ready';
    this.connection.on('ready', () => {
      // ioredis resubscribes by itself; a release published while we were away is lost, so retry all.
      if (connectedBefore) onReconnect();
      connectedBefore = true;
    });
  }

  async close(): Promise<void> {
    if (!this.owned) return;
    try {
      await this.connection.quit();
    } catch {
      this.connection.disconnect();
    }
  }
}
