import { holdIdMaker } from '../holds/hold-ids';
import { randomUUID } from 'node:crypto';
import { MAX_TURN_MS, ProcessTurns, TURN_MS } from '../turns/process-turns';
import type { Cluster, Redis } from 'ioredis';
import { EventEmitter } from 'node:events';
import type { EngineContext } from './engine-context';
import { LockOptionsError } from '../errors';
import { lockKeys } from '../redis/keys';
import { LockRegistry } from '../holds/lock-registry';
import { consoleLogger, type LockLogger } from '../util/logger';
import {
  assertKeyPrefix,
  assertLockName,
  checkDuration,
  IDLE_KEY_TTL_RULE,
  show,
  TIMEOUT_RULE,
} from '../util/validation';
import { DEFAULT_DRIFT_FACTOR } from '../util/clock';
import { RedisPubSub, type PubSub } from '../waiting/pubsub';
import { handleResubscribeRejections } from '../waiting/resubscribe-rejections';
import { RecentReleases } from '../holds/recent-releases';
import { LockObjects } from './lock-objects';
import { ioredisKeyPrefix, type PublishCommand, type RedisClient } from '../redis/redis-client';
import { ReentrantLock } from '../kinds/reentrant-lock';
import { registerScripts } from '../scripts/loader';
import { bounded } from '../redis/bounded';
import { SimpleLock, type SimpleLockOptions } from '../kinds/simple-lock';
import { FairLock, type FairLockOptions } from '../kinds/fair-lock';
import { Semaphore, type SemaphoreOptions } from '../kinds/semaphore';
import { QUIET_RECHECK_MS } from '../lock/lock-base';
import { ReadWriteLock } from '../kinds/read-write-lock';
import { ClosingWaits } from '../waiting/closing-waits';
import type { ReadWriteLockOptions } from '../kinds/write-lock';
import { LockWaiters } from '../waiting/waiters';
import { checkReplicaSync, ReplicaSync, type ReplicaSyncSetting } from '../redis/replica-sync';
import { Watchdog } from '../holds/watchdog';
import type { EmitLockEvent, LockClientEvents } from './lock-events';
import { inspectLock, type LockInspection } from './inspection';
import { instrumentLockClient, telemetryProblems, type LockTelemetryOptions } from './telemetry';
import { checkHealth, type LockClientHealth } from './client-health';
import { EvictionCheck } from '../redis/eviction-check';
import { followSocketAge, socketSince } from '../redis/connection-mark';
import { followClusterMasters } from '../redis/cluster-masters';

export interface LockClientOptions {
  /** Where lock commands run: an ioredis client (standalone / sentinel) or Cluster. Not closed by `close()`. */
  redis: RedisClient;
  /**
   * The pub/sub side. Omitted: a duplicate of `redis`, owned (and closed) by this client. A PubSub
   * you pass is closed by `close()` only if it says so.
   */
  pubsub?: PubSub;
  /** 'spublish' (sharded, Redis 7) on a Cluster, else 'publish'. */
  publishCommand?: PublishCommand;
  /** Namespace of every key. Default 'lock'. */
  keyPrefix?: string;
  /** Lease of locks taken without leaseTime, renewed every third of it. Default 30000 ms. */
  watchdogTimeout?: number;
  /** Longest any single Redis operation may take before RedisUnavailableError. Default 3000 ms. */
  operationTimeout?: number;
  /**
   * The share of every lease a holder gives up to clock drift, plus 2 ms: its `signal` aborts (and the
   * lock counts as lost here) that long before Redis can let the lease run out, counted from when the
   * command that set it was sent. In [0, 1); default 0.01, Redlock's rule.
   */
  driftFactor?: number;
  /**
   * How long this process may keep taking a contended reentrant or simple lock (a loop, or its own
   * waiters one after another) before passing it to the process that waited longest. Default 10 ms;
   * a turn of short holds goes on until it has held the lock 12 times, up to 3 × this (see
   * TURN_MIN_HOLDS). 0 passes it on at every release, as Redisson does. See ProcessTurns.
   */
  turnTime?: number;
  /**
   * How long what a lock name leaves in Redis outlives its last grant or renewal, past that hold's
   * lease: its fencing counter (and a semaphore's run-time limit). Then Redis holds nothing for the
   * name; its next token is still larger (tokens never fall below Redis's clock, see
   * lua/include/fencing.lua). Default 600000 (10 min), at most 24 h.
   */
  idleKeyTtl?: number;
  /** Default: console. */
  logger?: LockLogger;
  /** Default: a random UUID. */
  clientId?: string;
  /**
   * WAIT for replicas after each first acquisition. Default 'auto': one replica, when the master has
   * one online, never failing the acquisition (see ReplicaSyncSetting); an object enforces a count;
   * false never waits.
   */
  replicaSync?: ReplicaSyncSetting;
  /**
   * OpenTelemetry metrics and spans (see instrumentLockClient): on by default, through the global
   * providers, so a no-op until the application registers an OpenTelemetry SDK (before creating this
   * client). Options choose other providers and a bounded `lock.name` attribute; false turns it off.
   */
  telemetry?: false | LockTelemetryOptions;
  /** Runs at the end of `close()`: how a client created from a deployment closes its connections. */
  onClose?: () => Promise<void>;
  /**
   * Why the connections of a client created from a deployment fail to connect, if they do (see
   * LockClientHealth's `redis.connectionError`).
   */
  connectionProblem?: () => string | undefined;
}

/** How long a name's fencing counter outlives its last use (see LockClientOptions.idleKeyTtl), unless configured. */
export const DEFAULT_IDLE_KEY_TTL = 600_000;

/** Longest any single Redis operation may take before RedisUnavailableError, unless configured. */
export const DEFAULT_OPERATION_TIMEOUT = 3_000;

/** Each client's engine (see engineOf). */
const engines = new WeakMap<LockClient, EngineContext>();

/**
 * One lock engine over one Redis deployment: owner identity, the shared subscriber, the watchdog and
 * the record of held locks. Create one per process (the Nest module does) and get locks from it.
 * @example
 * const locks = new LockClient({ redis: new Redis() });
 * await locks.getLock('nightly-export').withLock(() => exportAll());
 * await locks.close();
 */
export class LockClient extends EventEmitter<LockClientEvents> {
  readonly clientId: string;
  readonly keyPrefix: string;
  readonly watchdogTimeout: number;
  readonly operationTimeout: number;
  /** How long a name's fencing counter outlives its last grant or renewal, past the lease (see LockClientOptions). */
  readonly idleKeyTtl: number;
  readonly publishCommand: PublishCommand;
  readonly redis: RedisClient;
  /** What this client's locks share (see EngineContext): handed to each lock, never to the user. */
  private readonly engine: EngineContext;
  private readonly pubsub: PubSub;
  private readonly onClose?: () => Promise<void>;
  private readonly connectionProblem: () => string | undefined;
  private readonly evictionCheck: EvictionCheck;
  private closed = false;
  /** Whether `redis` was ready before, as far as this client knows (see onConnectionReady). */
  private connectedBefore: boolean;
  private stopTelemetry?: () => void;
  private stopFollowingMasters?: () => void;

  constructor(options: LockClientOptions) {
    super();
    if (!options || typeof options !== 'object' || !options.redis) {
      throw new LockOptionsError('LockClient needs an ioredis client or Cluster in `redis`.');
    }
    const keyPrefix = options.keyPrefix ?? 'lock';
    assertKeyPrefix(keyPrefix);
    assertIntegerReplies(options.redis);
    const redis = (this.redis = options.redis);
    this.clientId = options.clientId ?? randomUUID();
    this.keyPrefix = keyPrefix;
    this.watchdogTimeout = checkDuration('', 'watchdogTimeout', options.watchdogTimeout, TIMEOUT_RULE) ?? 30_000;
    const operationTimeout = (this.operationTimeout =
      checkDuration('', 'operationTimeout', options.operationTimeout, TIMEOUT_RULE) ?? DEFAULT_OPERATION_TIMEOUT);
    const logger = options.logger ?? consoleLogger;
    const turns = new ProcessTurns(checkDuration('', 'turnTime', options.turnTime, { max: MAX_TURN_MS }) ?? TURN_MS);
    const driftFactor = checkDriftFactor(options.driftFactor);
    const idleKeyTtl = (this.idleKeyTtl =
      checkDuration('', 'idleKeyTtl', options.idleKeyTtl, IDLE_KEY_TTL_RULE) ?? DEFAULT_IDLE_KEY_TTL);
    const replicaSync = checkReplicaSync(options.replicaSync); // before any connection is made
    assertTelemetryOptions(options.telemetry);
    this.onClose = options.onClose;
    this.connectionProblem = options.connectionProblem ?? (() => undefined);
    const sharded = options.publishCommand ? options.publishCommand === 'spublish' : redis.isCluster;
    this.publishCommand = sharded ? 'spublish' : 'publish';
    this.pubsub = options.pubsub ?? new RedisPubSub(ownSubscriber(redis), sharded, true);
    if (this.pubsub instanceof RedisPubSub) this.pubsub.checkChannelPrefix(ioredisKeyPrefix(redis));
    const watchdog = new Watchdog(
      redis,
      Math.max(1, Math.floor(this.watchdogTimeout / 3)),
      operationTimeout,
      logger,
      idleKeyTtl,
      (renewed, failed) => this.lockEvent('renewed', () => ({ renewed, failed })),
    );
    const registry = new LockRegistry(
      watchdog,
      (error) => {
        logger.warn(error.message);
        this.emit('lockLost', error);
      },
      driftFactor,
    );
    registerScripts(redis);
    this.engine = {
      redis,
      clientId: this.clientId,
      newHoldId: holdIdMaker(),
      keyPrefix,
      watchdogTimeout: this.watchdogTimeout,
      operationTimeout,
      publishCommand: this.publishCommand,
      waiters: new LockWaiters(this.pubsub, ioredisKeyPrefix(redis)),
      watchdog,
      registry,
      recentReleases: new RecentReleases(redis, registry, operationTimeout),
      turns,
      idleKeyTtl,
      logger,
      quietRecheckMs: QUIET_RECHECK_MS,
      replicaSync: new ReplicaSync(replicaSync, redis, operationTimeout, logger),
      lockEvent: this.lockEvent,
      waits: new ClosingWaits(),
    };
    engines.set(this, this.engine);
    // Locks vanish from a Redis that evicts keys: say so (once per master), on every (re)connect.
    this.evictionCheck = new EvictionCheck(redis, operationTimeout, logger);
    followSocketAge(redis); // before onReady, which compares the subscriber's socket with it
    this.connectedBefore = redis.status === 'ready';
    redis.on('ready', this.onConnectionReady);
    // A Cluster stays ready through a shard's failover: its masters are followed instead.
    if (redis.isCluster) this.stopFollowingMasters = followClusterMasters(redis as Cluster, () => this.onReady(false));
    if (redis.status === 'ready') this.evictionCheck.run();
    if (options.telemetry !== false) {
      this.stopTelemetry = instrumentLockClient(this, this.engine.waiters, options.telemetry);
    }
  }

  /**
   * Connected, or back from a disconnect or a failover (maybe to another master; on a Cluster, a
   * shard's): its replicas and memory settings are read afresh, and renewals that failed meanwhile
   * are retried at once.
   */
  private readonly onReady = (firstConnection: boolean): void => {
    if (!firstConnection) this.engine.replicaSync.forget();
    this.subscriberAfterCommands();
    this.evictionCheck.run();
    void this.engine.watchdog.tick();
  };

  /**
   * `redis` is ready. The first time, when it was not ready as this client was made, no command of ours
   * has run anywhere yet (ioredis holds commands until its connection is ready): a grant asked for
   * meanwhile is made on this connection, and is vouched for as any other (no check that a failover
   * kept it, which would cost the first lock a round trip).
   */
  private readonly onConnectionReady = (): void => {
    const first = !this.connectedBefore;
    this.connectedBefore = true;
    this.onReady(first);
  };

  /**
   * The command connection reconnected (maybe to a new master) while the subscriber stayed on its
   * socket, which may be on the old master, alive behind a partition: our subscriber reconnects too,
   * so that hand-overs told in messages can be believed again (see handOverFirstLease).
   */
  private subscriberAfterCommands(): void {
    const { pubsub, redis } = this;
    if (!(pubsub instanceof RedisPubSub) || redis.isCluster) return;
    const commands = socketSince(redis as Redis);
    const subscriber = pubsub.socketSince;
    if (commands !== undefined && subscriber !== undefined && subscriber < commands) pubsub.reconnect();
  }

  /**
   * A reentrant lock (Redisson RLock) named `name`. Cheap: it holds no state of its own, and a name
   * used recently gets the same object back.
   */
  getLock(name: string): ReentrantLock {
    return this.reentrantLocks.get(name, this.makeReentrant);
  }

  /** A fair (FIFO) lock named `name`, sharing the reentrant lock's hash: the two exclude each other. */
  getFairLock(name: string, options?: FairLockOptions): FairLock {
    if (options !== undefined) return new FairLock(this.engine, name, options);
    return this.fairLocks.get(name, this.makeFair);
  }

  /** A simple `SET NX PX` lock named `name`: not re-entrant, 3 s wait and lease by default. */
  getSimpleLock(name: string, options?: SimpleLockOptions): SimpleLock {
    if (options !== undefined) return new SimpleLock(this.engine, name, options);
    return this.simpleLocks.get(name, this.makeSimple);
  }

  private readonly reentrantLocks = new LockObjects<ReentrantLock>();
  private readonly fairLocks = new LockObjects<FairLock>();
  private readonly simpleLocks = new LockObjects<SimpleLock>();
  private readonly makeReentrant = (name: string) => new ReentrantLock(this.engine, name);
  private readonly makeFair = (name: string) => new FairLock(this.engine, name);
  private readonly makeSimple = (name: string) => new SimpleLock(this.engine, name);

  /**
   * A semaphore named `name`: at most `permits` held at once across every process, each acquisition
   * with a lease of its own (renewed by the watchdog while held). Cheap: holds no state of its own.
   * @example
   * const payments = locks.getSemaphore('payment-provider', { permits: 5 });
   */
  getSemaphore(name: string, options: SemaphoreOptions): Semaphore {
    return new Semaphore(this.engine, name, options);
  }

  /**
   * A read-write lock named `name` (Redisson RReadWriteLock): `readLock()` is shared, `writeLock()`
   * exclusive; a waiting writer holds back new readers. Its keys are apart from `getLock(name)`'s.
   */
  getReadWriteLock(name: string, options?: ReadWriteLockOptions): ReadWriteLock {
    return new ReadWriteLock(this.engine, name, options);
  }

  /** Emits a lock event if anyone listens (see LockClientEvents); the payload is built only then. */
  private readonly lockEvent: EmitLockEvent = (event, make) => {
    if (this.listenerCount(event) > 0) (this.emit as (e: string, payload: unknown) => boolean)(event, make());
  };

  /**
   * What Redis holds for lock `name` right now, read atomically: holders and hold counts, remaining
   * lease, the last fencing token, fair-queue waiters, waiting processes (see LockInspection).
   * @example
   * const { state, holders, remainingLeaseMs } = await locks.inspect('order:42');
   */
  async inspect(name: string): Promise<LockInspection> {
    assertLockName(name);
    const keys = lockKeys(this.keyPrefix, name);
    return bounded(inspectLock(this.redis, name, keys), this.operationTimeout, { key: name, name: 'inspect' });
  }

  /**
   * Whether this client can lock right now: the lock connection answers PING (within
   * operationTimeout), the subscriber is not cut off, the watchdog's renewals are on schedule.
   * Never throws; the Nest health indicator (`nestjs-redis-lock/health`) reports it.
   */
  health(): Promise<LockClientHealth> {
    const ping = () => bounded(this.redis.ping(), this.operationTimeout, { name: 'health check' });
    return checkHealth(this, this.engine.watchdog, ping, this.connectionProblem);
  }

  /** The subscriber connection's state (see health()). */
  get subscriberStatus(): string {
    return this.pubsub.status ?? 'unknown';
  }

  /** Locks currently held through this client (one entry per lock and owner). */
  get heldLockCount(): number {
    return this.engine.registry.size;
  }

  /**
   * Stops the watchdog, releases what this client still holds (best effort, bounded by
   * operationTimeout; what cannot be released expires with its lease) and closes the connections it
   * created. A hold still held is reported lost first (LockLostError, reason `closed`): its holder's
   * `signal` aborts, and the client logs a warning and emits `lockLost`, before the release is sent.
   * The `redis` client passed in stays open: it is the caller's.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.redis.off('ready', this.onConnectionReady);
    this.stopFollowingMasters?.();
    this.stopTelemetry?.();
    const { recentReleases, watchdog, waiters, registry, logger, turns, waits } = this.engine;
    // Waits end first, while Redis can still be reached: a write wait withdraws its intent, and a hold
    // granted meanwhile is among those released below.
    await waits.close(2 * this.operationTimeout);
    recentReleases.close();
    watchdog.close();
    waiters.close();
    const held = registry.all();
    // Whatever still runs under these locks is told first (its signal aborts, the log says so): they
    // are given up now, and another process may take them at once.
    for (const lock of held) lock.markLost('closed');
    await Promise.all(
      held.map(async (lock) => {
        try {
          // Every hold this client has, so nothing of ours outlives it; by id, never by count: an owner
          // shared with another process has that process's holds too, which are not ours to release.
          while (lock.holdCount > 0 && !lock.released) await lock.release();
        } catch (error) {
          logger.warn(`Could not release "${lock.name}" on close: ${(error as Error).message}`);
        }
      }),
    );
    // A lock released in this process's turn is passed on now, not after the connections are gone.
    await turns.flush();
    await this.pubsub.close();
    await this.onClose?.();
  }
}

/**
 * What `client`'s locks share (waiters, watchdog, held locks, logger, …): for the package's own layers
 * (telemetry, RedLock, the Nest glue) and the tests, never part of the public API.
 */
export function engineOf(client: LockClient): EngineContext {
  return engines.get(client)!;
}

/** Whether `value` is a LockClient (one this module constructed). */
export function isLockClient(value: unknown): value is LockClient {
  return typeof value === 'object' && value !== null && engines.has(value as LockClient);
}

/**
 * A connection for pub/sub, duplicated from the command client. A Cluster's duplicate subscribes per
 * shard (sharded subscribers), so SSUBSCRIBE reaches the node serving each channel's slot.
 */
export function subscriberFor(client: RedisClient): RedisClient {
  // Queued and kept across reconnects: ioredis's own re-subscribe must not reject (see SUBSCRIBER_OVERRIDES).
  const overrides = { enableOfflineQueue: true, maxRetriesPerRequest: null };
  return client.isCluster
    ? (client as Cluster).duplicate(undefined, {
        shardedSubscribers: true,
        enableOfflineQueue: true,
        redisOptions: { ...(client as Cluster).options.redisOptions, maxRetriesPerRequest: null },
      })
    : (client as Redis).duplicate(overrides);
}

/** A subscriber this client makes and closes itself (see handleResubscribeRejections). */
function ownSubscriber(client: RedisClient): RedisClient {
  const subscriber = subscriberFor(client);
  handleResubscribeRejections(subscriber);
  return subscriber;
}

/**
 * ioredis `stringNumbers` turns every integer reply into a string: fencing tokens would compare as
 * text ('10' < '9') and the engine would misread its scripts' replies. Refused up front.
 */
function assertIntegerReplies(client: RedisClient): void {
  const options = client.isCluster ? (client as Cluster).options.redisOptions : (client as Redis).options;
  if (!options?.stringNumbers) return;
  throw new LockOptionsError(
    'The ioredis client has stringNumbers: true, which turns integer replies (fencing tokens, hold counts) ' +
      'into strings. Give the lock client a connection without it, e.g. client.duplicate({ stringNumbers: false }).',
    undefined,
    { option: 'redis', value: 'stringNumbers: true' },
  );
}

function assertTelemetryOptions(telemetry: unknown): void {
  const problems = telemetryProblems(telemetry);
  if (problems.length > 0) {
    throw new LockOptionsError(`${problems.join('; ')}.`, undefined, { option: 'telemetry', value: telemetry });
  }
}

/** `driftFactor` in [0, 1) (default DEFAULT_DRIFT_FACTOR), or LockOptionsError before any connection is used. */
function checkDriftFactor(value: unknown): number {
  if (value === undefined) return DEFAULT_DRIFT_FACTOR;
  if (typeof value === 'number' && value >= 0 && value < 1) return value;
  throw new LockOptionsError(`driftFactor must be a number in [0, 1), got ${show(value)}.`, undefined, {
    option: 'driftFactor',
    value,
  });
}
