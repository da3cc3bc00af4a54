import { monotonicNow } from '../util/clock';
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
 *
 * When a RedLock keeps restarted masters out (`restartQuarantine`), it also tells how long the master
 * has been up: read with `INFO server` on each connection (a restart drops it), and unknown until
 * that reply came, so no vote is asked of a master whose start this client has not read yet.
 */
export class MasterHealth {
  /** Was ever ready: a client still making its first connection gets a (bounded) try. */
  private everReady: boolean;
  private down = false;
  private probeTimer?: NodeJS.Timeout;
  private probing = false;
  /** Whether starts are read (see watchStarts). */
  private watchingStarts = false;
  /** When the master started, on this process's monotonic clock (never earlier than it did); undefined: unknown. */
  private startedAt?: number;
  /**
   * Bumped at each connection ('ready'), before ioredis sends again what the last one left unanswered: a
   * reply that comes on a later connection than its command was sent on may come from another server.
   */
  private connection = 0;
  /** The read of the start in flight, if any. */
  private startRead?: Promise<void>;
  /** The first connection and the read of the start on it, while a round waits for them (see startBeingRead). */
  private firstReady?: Promise<void>;
  /** Why the last read of the start failed (INFO refused or unreadable), for the error that reports it. */
  startProblem?: string;

  constructor(private readonly redis: RedisClient) {
    this.everReady = redis.status === 'ready';
    redis.on('ready', () => {
      this.everReady = true;
      this.connection++;
      this.startedAt = undefined;
      this.startRead = undefined;
      if (this.watchingStarts) this.readStart();
      this.up();
    });
  }

  /** The connection now (see `connection`), to tell whether a reply came on the one its command went on. */
  get connectionCount(): number {
    return this.connection;
  }

  get usable(): boolean {
    return !this.down && (this.redis.status === 'ready' || !this.everReady);
  }

  /** From now on, read when the master started at every connection (see upFor). */
  watchStarts(): void {
    if (this.watchingStarts) return;
    this.watchingStarts = true;
    if (this.redis.status === 'ready') this.readStart();
  }

  /**
   * How long the master has been up, in ms, at least (up to two seconds less: see readStart; the time the
   * reply took is not added); undefined while unknown: not read yet on this connection, or
   * the read failed (asked again here, one read at a time).
   */
  upFor(): number | undefined {
    if (this.startedAt === undefined) {
      this.readStart();
      return undefined;
    }
    return monotonicNow() - this.startedAt;
  }

  /**
   * The read of the start under way (started here when the start is unknown), or undefined: none to wait
   * for. A client still making its first connection reads it once ready: that is waited for too.
   */
  startBeingRead(): Promise<void> | undefined {
    if (this.startedAt !== undefined) return undefined;
    this.readStart();
    if (this.startRead || this.everReady || !this.watchingStarts) return this.startRead;
    // One listener however many rounds wait; the 'ready' listener above runs first and starts the read.
    this.firstReady ??= new Promise<void>((resolve) => this.redis.once('ready', () => resolve())).then(
      () => this.startRead,
    );
    return this.firstReady;
  }

  private readStart(): void {
    if (this.startRead || !this.watchingStarts || this.redis.status !== 'ready') return;
    const connection = this.connection;
    const read = this.redis.info('server').then(
      (text) => {
        if (connection !== this.connection) return;
        this.startRead = undefined;
        const uptime = /^uptime_in_seconds:(\d+)\s*$/m.exec(text);
        if (!uptime) {
          this.startProblem = 'its INFO server reply has no uptime_in_seconds';
          return;
        }
        this.startProblem = undefined;
        // Taken when the reply is read, less a second: Redis counts the uptime as the difference of two
        // whole-second clock readings, up to a second more than has passed. So the start is never placed
        // earlier than it was.
        this.startedAt = monotonicNow() - Math.max(0, Number(uptime[1]) - 1) * 1000;
      },
      (error: unknown) => {
        if (connection !== this.connection) return;
        this.startRead = undefined;
        this.startProblem = `INFO server failed: ${(error as Error).message}`;
      },
    );
    this.startRead = read;
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
