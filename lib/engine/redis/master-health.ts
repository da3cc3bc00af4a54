import type { RedisClient } from './redis-client';

/** How often a master that stopped answering is probed with a PING. */
export const PROBE_INTERVAL_MS = 250;

/**
 * Whether a RedLock master is worth asking now. A master is skipped while its connection is down
 * (ioredis reconnecting: a command would sit in the offline queue) or after it failed to answer in
 * time (frozen, overloaded): a round then never waits on it. It is asked again once its connection
 * is ready again, or once it answers a PING (sent every PROBE_INTERVAL_MS, one at a time: a PING
 * that never comes back keeps the master skipped, and sends no more). One per client, shared by
 * every RedLock of the process.
 */
export class MasterHealth {
  /** Was ever ready: a client still making its first connection gets a (bounded) try. */
  private everReady: boolean;
  private down = false;
  private probeTimer?: NodeJS.Timeout;
  private probing = false;

  constructor(private readonly redis: RedisClient) {
    this.everReady = redis.status === 'ready';
    redis.on('ready', () => {
      this.everReady = true;
      this.up();
    });
  }

  get usable(): boolean {
    return !this.down && (this.redis.status === 'ready' || !this.everReady);
  }

  /** The master did not answer in time or its connection failed: skip it until it answers again. */
  markDown(): void {
    if (this.down) return;
    this.down = true;
    this.probeTimer = setInterval(() => this.probe(), PROBE_INTERVAL_MS);
    this.probeTimer.unref();
  }

  private probe(): void {
    // Not connected: ioredis reconnects by itself and says so with 'ready'.
    if (this.probing || this.redis.status !== 'ready') return;
    this.probing = true;
    this.redis.ping().then(
      () => {
        this.probing = false;
        this.up();
      },
      () => void (this.probing = false),
    );
  }

  private up(): void {
    clearInterval(this.probeTimer);
    this.probeTimer = undefined;
    this.down = false;
  }
}

const healths = new WeakMap<RedisClient, MasterHealth>();

/** The health record of the master behind `redis`. */
export function masterHealth(redis: RedisClient): MasterHealth {
  let health = healths.get(redis);
  if (!health) {
    health = new MasterHealth(redis);
    healths.set(redis, health);
  }
  return health;
}
