import { randomUUID } from 'node:crypto';
import type { Attempt } from '../waiting/acquire-loop';
import { bounded } from '../redis/bounded';
import { writesToFixedServer } from '../redis/fixed-server';
import { assertLockName, assertOptionsObject, checkDuration, LEASE_RULE, MAX_LEASE_MS, show } from '../util/validation';
import type { EngineContext } from '../client/engine-context';
import { LockAcquireTimeoutError, LockOptionsError } from '../errors';
import type { RenewalKind } from '../holds/held-lock';
import { withLock } from './with-lock';
import { semaphoreKeys, type SemaphoreKeys } from '../redis/keys';
import {
  attemptOutcome,
  LockBase,
  QUIET_RECHECK_MS,
  waitingFlag,
  type AttemptRequest,
  type Grant,
  type RawRelease,
  type WaitBehaviour,
} from './lock-base';
import type { LockKindName } from '../client/lock-events';
import type { LockContext, LockHandle } from '../holds/lock-handle';
import {
  SEMAPHORE_ACQUIRE,
  SEMAPHORE_PASS,
  SEMAPHORE_RELEASE,
  SEMAPHORE_SET_PERMITS,
  SEMAPHORE_STATE,
} from '../scripts/catalog';

/** semaphore-acquire-5.lua's refusal of an ask above the current limit (see PermitLock.attempt). */
const NEVER_GRANTABLE = -2;

/** Largest limit (and number of permits in one acquisition) the scripts accept. */
export const MAX_PERMITS = 2_147_483_647;

/**
 * A semaphore's keys (see keys.ts) and `released`: the holds released lately, hold member -> until
 * when a repeat of its release still replies 'released' (see semaphore-release-5.lua).
 */
export type PermitKeys = SemaphoreKeys & { readonly released: string };

export function permitKeys(prefix: string, name: string): PermitKeys {
  const keys = semaphoreKeys(prefix, name);
  return { ...keys, released: `${keys.holds}:released` };
}

export interface SemaphoreOptions {
  /**
   * How many permits may be held at once, unless `setPermits` stored another limit in Redis (that one
   * wins, for every process). A whole number >= 1.
   */
  permits: number;
  /** Default lease of each acquisition, or 'watchdog' (the default) to renew it while held. */
  leaseTime?: number | 'watchdog';
}

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
 * so the permits of a crashed holder come back when its lease ends; releases wake the waiters by
 * pub/sub. Not re-entrant: every acquisition counts.
 * @example
 * const payments = locks.getSemaphore('payment-provider', { permits: 5 });
 * await payments.withPermits(({ signal }) => provider.charge(order, { signal }));
 */
export class Semaphore {
  readonly keys: PermitKeys;
  /** The limit this client was configured with (a limit stored by `setPermits` wins over it). */
  readonly permits: number;
  private readonly defaultLeaseTime: number | undefined;

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
   * Changes the limit for every process: it is stored in Redis (without expiry) and wins over the
   * `permits` each client was configured with. Growing it wakes the waiters; shrinking it takes no
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
      }),
      'setPermits',
    );
  }

  /** Checks everything before any Redis call; the lock view that takes `permits` permits. */
  private prepare(options: PermitAcquireOptions) {
    assertOptionsObject(this.name, options);
    const { permits: requested, ...rest } = options;
    const permits = requested === undefined ? 1 : checkPermits(this.name, 'permits', requested, this.permits);
    const lock = new PermitLock(this.engine, this.name, this.keys, permits, this.permits, this.defaultLeaseTime);
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

/**
 * One acquisition of `permits` permits, seen as a lock so that it shares LockBase's acquire loop,
 * handles, watchdog renewals, and releases retried through an outage. Each acquisition is a hold of
 * its own (like a simple lock's token): the member '<permits>:<owner>:<uuid>' of the holds set.
 * A refused waiter registers its process's group of waiters for that many permits, which listens on
 * a channel of its own; permits coming free wake the longest-waiting group that can take them (see
 * lua/include/semaphore-waiting.lua), never one that wants more than are free while a smaller one
 * waits. A wake-up its group cannot use (taken meanwhile, no waiter left, the waiter gave up) is
 * passed on at once by the script that finds it so; a waiter granted with permits left over wakes
 * the next group.
 */
class PermitLock extends LockBase {
  override readonly kind: LockKindName = 'semaphore';
  protected readonly renewal: RenewalKind = 'permit';
  protected override readonly defaultLeaseTime: number | undefined;

  constructor(
    engine: EngineContext,
    name: string,
    private readonly semaphore: PermitKeys,
    private readonly permits: number,
    private readonly limit: number,
    defaultLeaseTime: number | undefined,
  ) {
    // `lock` is the holds, under which the registry and the watchdog know each hold; the hand-over
    // and the fair queue are not used.
    const { holds, fence, channel, waiting } = semaphore;
    super(engine, name, () => ({
      lock: holds,
      fence,
      channel,
      waiting,
      next: holds,
      queue: holds,
      deadlines: holds,
      forced: holds,
      grants: holds,
    }));
    this.defaultLeaseTime = defaultLeaseTime;
  }

  /** The holds, the fencing counter, then the run-time limit (see renew-many-n.lua). */
  protected override get renewalKeys(): readonly string[] {
    return (this.renewed ??= [this.semaphore.holds, this.semaphore.fence, this.semaphore.limit]);
  }

  private renewed?: readonly string[];

  protected override holderFor(owner: string): string {
    return `${this.permits}:${owner}:${randomUUID()}`;
  }

  /** This process's waiters for this many permits: '<channel>:<permits>:<client id>' (see semaphore-waiting.lua). */
  private get groupChannel(): string {
    return (this.ownGroupChannel ??= `${this.semaphore.channel}:${this.permits}:${this.engine.clientId}`);
  }

  private ownGroupChannel?: string;

  /** LockBase's waiting, on the group's channel: a wake-up that finds no waiter of the group is passed on. */
  protected override waitBehaviour(): WaitBehaviour {
    return { channel: this.groupChannel, onUnheard: () => void this.passOn(), quietRecheckMs: QUIET_RECHECK_MS };
  }

  /** The group's last waiter gave up: it leaves the registry, passing on a wake-up that may be on its way. */
  protected override async abandonWait(_owner: string, _waiterId: string | undefined, waited: boolean): Promise<void> {
    if (waited && this.engine.waiters.memberCount(this.groupChannel) === 0) void this.passOn();
  }

  /** The group leaves the waiting registry and, if permits are free, a group that can take them is woken. */
  protected override passScript(): Promise<unknown> {
    const { redis, clientId, publishCommand } = this.engine;
    return SEMAPHORE_PASS.run(redis, this.semaphore, {
      clientId,
      permits: this.permits,
      configuredLimit: this.limit,
      publish: publishCommand,
    });
  }

  /** Best effort: unreachable, the group's channel goes quiet once its waiters left, and the others re-check. */
  private passOn(): Promise<void> {
    return this.bounded(this.passScript(), 'pass wake-up').then(
      () => undefined,
      () => undefined,
    );
  }

  protected async attempt({ holder, leaseMs, waiting }: AttemptRequest): Promise<Attempt<Grant>> {
    const { redis, clientId, publishCommand, idleKeyTtl } = this.engine;
    const [status, value, limit] = await SEMAPHORE_ACQUIRE.run(redis, this.semaphore, {
      idleKeyTtl,
      member: holder,
      permits: this.permits,
      leaseMs,
      configuredLimit: this.limit,
      publish: publishCommand,
      chained: waiting?.refusedBefore ? '1' : '0',
      clientId,
      waiting: waitingFlag(waiting),
    });
    if (status === 'refused' && value === NEVER_GRANTABLE) {
      throw new LockOptionsError(
        `Cannot take ${this.permits} permit(s) of semaphore "${this.name}": its limit is ${limit} now ` +
          '(lowered by setPermits), so no release can ever make room. Ask for fewer, or raise the limit.',
        this.name,
        { option: 'permits', value: this.permits },
      );
    }
    return attemptOutcome(status, value, holder);
  }

  /**
   * Remembered for an operation timeout (no caller waits longer for the reply): a repeat of the same
   * release (an ioredis client re-sends it after a lost reply) still replies 'released'.
   */
  protected releaseOnce(holder: string): Promise<RawRelease> {
    const { redis, publishCommand, operationTimeout } = this.engine;
    return SEMAPHORE_RELEASE.run(redis, this.semaphore, {
      member: holder,
      configuredLimit: this.limit,
      publish: publishCommand,
      memoryMs: Math.min(Math.ceil(operationTimeout), MAX_LEASE_MS),
    });
  }

  /** The unanswered attempt's member is in the holds: it was granted. */
  protected async grantOfUnknownAttempt(holder: string): Promise<Grant | undefined> {
    const [, deadline, fence] = await this.readHold(this.semaphore.holds, holder, 'zset');
    return deadline === null ? undefined : { fencingToken: Number(fence), reentered: false, holder };
  }
}
