import { bounded } from '../redis/bounded';
import { writesToFixedServer } from '../redis/fixed-server';
import { assertLockName, assertOptionsObject, checkDuration, LEASE_RULE, show, TIMEOUT_RULE } from '../util/validation';
import type { EngineContext } from '../client/engine-context';
import { LockAcquireTimeoutError, LockOptionsError } from '../errors';
import { withLock } from '../lock/with-lock';
import type { LockContext, LockHandle } from '../holds/lock-handle';
import { SEMAPHORE_SET_PERMITS, SEMAPHORE_STATE } from '../scripts/catalog';
import { PermitLock, type PermitTimings } from './permit-lock';
import { permitKeys, type PermitKeys } from './permit-keys';
import { PermitReleases } from './permit-releases';

/** Largest limit (and number of permits in one acquisition) the scripts accept. */
export const MAX_PERMITS = 2_147_483_647;

export interface SemaphoreOptions {
  /**
   * How many permits may be held at once, unless `setPermits` stored another limit in Redis (that one
   * wins, for every process). A whole number >= 1.
   */
  permits: number;
  /** Default lease of each acquisition, or 'watchdog' (the default) to renew it while held. */
  leaseTime?: number | 'watchdog';
  /**
   * Lease of permits a release just handed to a waiter, until that waiter's own renewal (at half of it,
   * unless it released them sooner) applies its lease. A waiter that cannot renew (its process frozen,
   * or cut off from Redis while its subscriber still listens) costs the others only this much: its
   * permits come back when it runs out, and the waiter learns it lost them. Default 1000 ms.
   */
  acceptanceLease?: number;
  /**
   * A waiting acquisition that has not refreshed its place in the queue for this long counts as dead
   * and is dropped. Waiters refresh every third of it. Default 5000 ms.
   */
  staleWaiterTimeout?: number;
}

export const SEMAPHORE_DEFAULTS = { acceptanceLease: 1_000, staleWaiterTimeout: 5_000 } as const;

/** Options of one acquisition. Times are in milliseconds. */
export interface PermitAcquireOptions {
  /** How many permits to take, all at once or none. Default 1; at most the configured `permits`. */
  permits?: number;
  /** How long to wait for free permits. `acquire`: omitted = as long as it takes; `tryAcquire`: default 0. */
  waitTime?: number;
  /** Lease of these permits (no watchdog). Omitted: the semaphore's `leaseTime`. */
  leaseTime?: number;
  /** Gives up waiting (rejecting with the signal's reason) when aborted. */
  signal?: AbortSignal;
}

/**
 * A semaphore with expiring permits: at most `permits` held at once across every process. Each
 * acquisition takes one or more permits with a lease of its own (renewed by the watchdog while held),
 * so the permits of a crashed holder come back when its lease ends. Waiting acquisitions queue in
 * FIFO order; a release hands its permits straight to the longest-waiting ones that fit (one that
 * wants more than is free lets smaller ones behind it in) and tells each in one message, which is
 * its grant. Not re-entrant: every acquisition counts.
 * @example
 * const payments = locks.getSemaphore('payment-provider', { permits: 5 });
 * await payments.withPermits(({ signal }) => provider.charge(order, { signal }));
 */
export class Semaphore {
  readonly keys: PermitKeys;
  /** The limit this client was configured with (a limit stored by `setPermits` wins over it). */
  readonly permits: number;
  private readonly defaultLeaseTime: number | undefined;
  private readonly timings: PermitTimings;
  /** How its holds are given back, shared by its acquisitions (see PermitReleases). */
  private readonly releases: PermitReleases;

  constructor(
    private readonly engine: EngineContext,
    readonly name: string,
    options: SemaphoreOptions,
  ) {
    assertLockName(name);
    if (options === null || typeof options !== 'object') {
      throw new LockOptionsError(`Semaphore options must be { permits, leaseTime? }, got ${show(options)}.`, name);
    }
    this.permits = checkPermits(name, 'permits', options.permits, MAX_PERMITS);
    const leaseTime = options.leaseTime ?? 'watchdog';
    const lease = { ...LEASE_RULE, watchdog: true };
    this.defaultLeaseTime = leaseTime === 'watchdog' ? undefined : checkDuration(name, 'leaseTime', leaseTime, lease);
    this.keys = permitKeys(engine.keyPrefix, name);
    this.timings = {
      acceptanceLease:
        checkDuration(name, 'acceptanceLease', options.acceptanceLease, TIMEOUT_RULE) ??
        SEMAPHORE_DEFAULTS.acceptanceLease,
      staleWaiterTimeout:
        checkDuration(name, 'staleWaiterTimeout', options.staleWaiterTimeout, TIMEOUT_RULE) ??
        SEMAPHORE_DEFAULTS.staleWaiterTimeout,
    };
    this.releases = new PermitReleases(engine, this.keys, this.permits, this.timings.acceptanceLease);
  }

  /**
   * Takes `permits` permits (default 1), waiting until they are free, or up to `waitTime` and then
   * throwing LockAcquireTimeoutError. The handle's signal aborts if the permits are lost.
   * @example
   * const handle = await semaphore.acquire({ permits: 2, waitTime: 5_000 });
   * try { await work(handle.signal); } finally { await handle.release(); }
   */
  async acquire(options: PermitAcquireOptions = {}): Promise<LockHandle> {
    const { permits, lock, rest } = this.prepare(options);
    if (rest.waitTime === undefined) return lock.lock(rest);
    const handle = await lock.tryLock(rest);
    if (handle) return handle;
    throw new LockAcquireTimeoutError(
      this.name,
      rest.waitTime,
      undefined,
      `Could not acquire ${permits} permit(s) of semaphore "${this.name}" within ${rest.waitTime} ms: too few were free.`,
    );
  }

  /** Takes `permits` permits within `waitTime` (default 0: one attempt), or resolves null. */
  async tryAcquire(options: PermitAcquireOptions = {}): Promise<LockHandle | null> {
    const { lock, rest } = this.prepare(options);
    return lock.tryLock(rest);
  }

  /**
   * Runs `fn` holding the permits and releases them however `fn` ends. Without `waitTime` it waits
   * until they are free; with one it throws LockAcquireTimeoutError when that runs out.
   */
  withPermits<T>(fn: (context: LockContext) => Promise<T> | T, options: PermitAcquireOptions = {}): Promise<T> {
    return withLock(() => this.acquire(options), fn, { logger: this.engine.logger, nameOf: () => this.name });
  }

  /** Permits free right now (0 while more than the limit are held after it shrank). */
  async availablePermits(): Promise<number> {
    const [limit, used] = await this.bounded(
      SEMAPHORE_STATE.run(this.engine.redis, this.keys, { configuredLimit: this.permits }),
      'availablePermits',
    );
    return Math.max(0, limit - used);
  }

  /**
   * Changes the limit for every process: it is stored in Redis and wins over the `permits` each client
   * was configured with while the semaphore is in use (it expires `idleKeyTtl` after the last
   * acquisition or renewal, past that lease; then the configured `permits` apply again). Growing it wakes the waiters; shrinking it takes no
   * permit from its holder, new acquisitions wait until fewer than the new limit are held.
   * Acquisitions still cannot ask for more permits than this client's configured `permits`.
   */
  async setPermits(permits: number): Promise<void> {
    permits = checkPermits(this.name, 'permits', permits, MAX_PERMITS);
    await this.bounded(
      SEMAPHORE_SET_PERMITS.run(this.engine.redis, this.keys, {
        permits,
        publish: this.engine.publishCommand,
        idleKeyTtl: this.engine.idleKeyTtl,
        acceptanceLease: this.timings.acceptanceLease,
      }),
      'setPermits',
    );
  }

  /** Checks everything before any Redis call; the lock view that takes `permits` permits. */
  private prepare(options: PermitAcquireOptions) {
    assertOptionsObject(this.name, options);
    const { permits: requested, ...rest } = options;
    const permits = requested === undefined ? 1 : checkPermits(this.name, 'permits', requested, this.permits);
    const lock = new PermitLock(
      this.engine,
      this.name,
      this.keys,
      permits,
      this.permits,
      this.defaultLeaseTime,
      this.timings,
      this.releases,
    );
    return { permits, lock, rest };
  }

  private bounded<T>(operation: Promise<T>, what: string): Promise<T> {
    const readOnlyIsFinal = writesToFixedServer(this.engine.redis);
    return bounded(operation, this.engine.operationTimeout, { key: this.name, name: what, readOnlyIsFinal });
  }
}

/** A whole number of permits in 1..max, or LockOptionsError naming the semaphore. */
function checkPermits(name: string, option: string, value: unknown, max: number): number {
  if (typeof value === 'number' && Number.isInteger(value) && value >= 1 && value <= max) return value;
  const limit = max === MAX_PERMITS ? '' : ` (the semaphore's configured permits)`;
  throw new LockOptionsError(`${option} must be a whole number in 1..${max}${limit}, got ${show(value)}.`, name, {
    option,
    value,
  });
}
