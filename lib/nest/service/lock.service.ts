import { Inject, Injectable } from '@nestjs/common';
import { LockAcquireTimeoutError, LockOptionsError } from '../../engine/errors';
import { LockModuleClosedError } from '../errors/lock-module-closed-error';
import type { FairLock, FairLockOptions } from '../../engine/kinds/fair-lock';
import type { LockInspection } from '../../engine/client/inspection';
import type { LockBase } from '../../engine/lock/lock-base';
import { engineOf, LockClient } from '../../engine/client/lock-client';
import type { LockHandle, ReleaseOutcome } from '../../engine/holds/lock-handle';
import { MultiLock } from '../../engine/groups/multi-lock';
import type { AcquireOptions } from '../../engine/lock/acquire-options';
import type { ReadWriteLock } from '../../engine/kinds/read-write-lock';
import { RedLock, type RedLockOptions } from '../../engine/groups/red-lock';
import type { ReentrantLock } from '../../engine/kinds/reentrant-lock';
import { SIMPLE_LOCK_DEFAULTS, type SimpleLock, type SimpleLockOptions } from '../../engine/kinds/simple-lock';
import type { ActiveLock } from './active-lock';
import { currentLock, runWithActiveLock } from './active-lock.store';
import { activeLockOf, type ServiceHold } from './service-hold';
import { untilShutdown } from './until-shutdown';
import { inHandlerCall } from '../decorator/handler-invocation';
import { LockLifecycle } from '../module/redis-lock.lifecycle';
import { RedLockMasters } from '../module/lock-client.provider';
import {
  LOCK_KINDS,
  SINGLE_LOCK_KINDS,
  type LockCallOptions,
  type LockKind,
  type SingleLockKind,
  type WithLockCallOptions,
} from './lock-service.options';
import { currentScope, nestedSection, runAsCriticalSection } from '../../engine/holds/owner-scope';
import { assertOptionsObject, show } from '../../engine/util/validation';
import { withLock } from '../../engine/lock/with-lock';
import { REDIS_LOCK_MODULE_OPTIONS } from '../redis-lock.constants';
import { messages } from '../redis-lock.messages';
import type { RedisLockModuleOptions } from '../module/redis-lock-module.options';

/**
 * Distributed locks for any provider: every lock kind of the engine, with the module's default
 * `waitTime` / `leaseTime`, plus the lock the current call runs under (`current()`).
 *
 * Locks are owned by the current async call chain (a lock scope): nested calls re-enter, concurrent
 * requests exclude each other. `withLock` opens a scope if there is none.
 * @example
 * @Injectable()
 * export class InvoiceService {
 *   constructor(private readonly locks: LockService) {}
 *
 *   pay(id: string) {
 *     return this.locks.withLock(`invoice:${id}`, async ({ fencingToken }) => this.repo.pay(id, fencingToken));
 *   }
 * }
 */
@Injectable()
export class LockService {
  // Explicit @Inject everywhere in this package: it then also works when compiled by esbuild / tsx,
  // which emit no decorator metadata.
  constructor(
    /**
     * The engine client the module created (and closes on shutdown), for what this service does not wrap.
     * @example
     * lockService.client.on('lockLost', (error) => metrics.increment('lock.lost', { lock: error.key }));
     */
    @Inject(LockClient) readonly client: LockClient,
    @Inject(REDIS_LOCK_MODULE_OPTIONS) private readonly options: RedisLockModuleOptions,
    @Inject(LockLifecycle) private readonly lifecycle: LockLifecycle,
    @Inject(RedLockMasters) private readonly redLockMasters: RedLockMasters,
  ) {}

  /**
   * Acquires `name`, waiting up to `waitTime` (default: the module's, else until free); throws
   * LockAcquireTimeoutError when that runs out. Release the handle when done.
   * @example
   * const handle = await lockService.lock(`cart:${id}`, { waitTime: 2_000 });
   * try {
   *   await checkout(id, handle.fencingToken);
   * } finally {
   *   await handle.release();
   * }
   */
  async lock(name: string, options: LockCallOptions = {}): Promise<LockHandle> {
    assertOptionsObject(name, options);
    const target = this.lockOf(name, options);
    return this.acquiring(
      name,
      options,
      false,
      (acquire) => target.lock(acquire),
      () => reenters(target, options),
    );
  }

  /**
   * Acquires `name` within `waitTime` (default 0: a single attempt) or resolves null.
   * @example
   * const handle = await lockService.tryLock('nightly-report');
   * if (!handle) return; // another instance is on it
   * try { await buildReport(); } finally { await handle.release(); }
   */
  async tryLock(name: string, options: LockCallOptions = {}): Promise<LockHandle | null> {
    assertOptionsObject(name, options);
    const single = { ...options, waitTime: options.waitTime === undefined ? 0 : options.waitTime };
    const target = this.lockOf(name, options);
    return this.acquiring(
      name,
      single,
      false,
      (acquire) => target.tryLock(acquire),
      () => reenters(target, options),
    );
  }

  /**
   * Runs `fn` holding `name` and releases it however `fn` ends; `fn`'s result and errors pass through.
   * Inside `fn`, `current()` returns this lock. Several names are held all-or-nothing, taken in one
   * global order (two calls naming the same accounts in opposite orders cannot deadlock).
   * `kind: 'redlock'` locks one name on a majority of the module's `redLock.masters`.
   * @example
   * await lockService.withLock(`stock:${sku}`, async ({ signal, fencingToken }) => {
   *   await stock.decrement(sku, { signal, fencingToken });
   * }, { waitTime: 5_000 });
   * await lockService.withLock([`account:${from}`, `account:${to}`], () => transfer(from, to, amount));
   */
  async withLock<T>(
    name: string | readonly string[],
    fn: (lock: ActiveLock) => Promise<T> | T,
    options: WithLockCallOptions = {},
  ): Promise<T> {
    const key = typeof name === 'string' ? name : String(name);
    assertOptionsObject(key, options);
    // Checked before anything is locked: a lock taken for a call that cannot run is a wasted round trip.
    if (typeof fn !== 'function') throw new LockOptionsError(messages.workNotAFunction(show(fn)), key);
    const { newScope, ...rest } = options;
    return this.lifecycle.track(
      (async () =>
        this.asCriticalSection(
          name,
          rest,
          () =>
            withLock(
              () => this.hold(name, rest),
              (held) => runWithActiveLock(held.lock, () => fn(held.lock)),
              { logger: engineOf(this.client).logger, nameOf: (held) => held.lock.name },
            ),
          newScope,
        ))(),
    );
  }

  /**
   * Runs `fn` (acquiring `name` and the work under it) as the lock's critical section: in the current
   * scope if it holds the lock already (a call from inside re-enters), else in a scope of its own, so
   * that sibling branches of one request exclude each other (see runAsCriticalSection).
   * @internal
   */
  asCriticalSection<T>(
    name: string | readonly string[],
    options: WithLockCallOptions,
    fn: () => T,
    newScope?: boolean,
  ): T {
    const names = lockNames(name);
    const target = options.permits !== undefined ? undefined : this.targetOf(names, this.kindOf(options), options);
    // A permit is never re-entered: each acquisition takes one of its own. Opened inside another
    // section, this one is nested in it (as the engine's withLock): a lock held around it re-enters from
    // inside it (A, then B, then A again), under that section's owner; the rest is taken under its own.
    return runAsCriticalSection((scope) => target?.heldInScope(scope) ?? false, fn, {
      newScope,
      inherit: nestedSection,
    });
  }

  /**
   * Acquires `name` (or several, all-or-nothing) as one lock of `options.kind`, in the current lock
   * scope: what `withLock` and `@DistributedLock` run on (inside asCriticalSection).
   * `signalEndsAtShutdown`: the caller's signal aborts at the module's shutdown already (the decorator's).
   * @internal
   */
  async hold(
    name: string | readonly string[],
    options: WithLockCallOptions,
    signalEndsAtShutdown = false,
  ): Promise<ServiceHold> {
    const names = lockNames(name);
    const kind = this.kindOf(options);
    if (options.permits !== undefined) return this.holdPermit(names, options, signalEndsAtShutdown);
    const target = this.targetOf(names, kind, options);
    const handle = await this.acquiring(
      target.name,
      options,
      signalEndsAtShutdown,
      async (acquire) => target.lock(acquire),
      () => reenters(target, options),
    );
    return { lock: activeLockOf(names, options.mode ?? kind, handle), release: () => handle.release() };
  }

  /** One permit of the semaphore `names[0]` whose limit is `options.permits`. */
  private async holdPermit(
    names: readonly string[],
    options: WithLockCallOptions,
    signalEndsAtShutdown: boolean,
  ): Promise<ServiceHold> {
    if (names.length > 1 || (options.kind ?? 'reentrant') !== 'reentrant' || options.mode !== undefined) {
      throw new LockOptionsError(messages.permitsOnePlainName(), names.join('+'));
    }
    const handle = await this.acquiring(names[0], options, signalEndsAtShutdown, ({ waitTime, leaseTime, signal }) =>
      this.client.getSemaphore(names[0], { permits: options.permits! }).acquire({ waitTime, leaseTime, signal }),
    );
    return { lock: activeLockOf(names, 'semaphore', handle), release: () => handle.release() };
  }

  /**
   * Releases one hold of `name` by the current lock scope (or `owner`). Prefer `handle.release()`
   * or `withLock`; this is for code that locks and unlocks in different places of one scope.
   * @example
   * await runInLockScope(async () => {
   *   await lockService.lock('migration');
   *   try { await migrate(); } finally { await lockService.unlock('migration'); }
   * });
   */
  async unlock(name: string, options: { kind?: SingleLockKind; owner?: string } = {}): Promise<ReleaseOutcome> {
    assertOptionsObject(name, options);
    return this.lockOf(name, options).unlock({ owner: options.owner });
  }

  /**
   * Whether anyone holds `name` (any kind: they share the key).
   * @example
   * if (await lockService.isLocked(`import:${tenant}`)) throw new ConflictException('Import running');
   */
  async isLocked(name: string): Promise<boolean> {
    return this.client.getLock(name).isLocked();
  }

  /**
   * Remaining lease of `name` in ms; -2 when it is not locked.
   * @example
   * const ttl = await lockService.remainTimeToLive('nightly-report');
   */
  async remainTimeToLive(name: string): Promise<number> {
    return this.client.getLock(name).remainTimeToLive();
  }

  /**
   * Deletes `name` whoever holds it and wakes its waiters (a fair lock goes to its next waiter).
   * True when it was locked. For operators: the holder is not told.
   * @example
   * await lockService.forceUnlock(`import:${tenant}`, { kind: 'fair' });
   */
  async forceUnlock(name: string, options: { kind?: SingleLockKind } = {}): Promise<boolean> {
    assertOptionsObject(name, options);
    return this.lockOf(name, options).forceUnlock();
  }

  /**
   * Who holds `name` now, since when it runs out, who waits: a snapshot read atomically from Redis
   * (any lock kind; see LockInspection).
   * @example
   * const { state, holders, remainingLeaseMs, queue } = await lockService.inspect(`order:${id}`);
   */
  inspect(name: string): Promise<LockInspection> {
    return this.client.inspect(name);
  }

  /**
   * The innermost lock the current call runs under: set by `@DistributedLock()` and `withLock`.
   * @example
   * const lock = lockService.current();
   * await repo.save(order, { fencingToken: lock?.fencingToken, signal: lock?.signal });
   */
  current(): ActiveLock | undefined {
    return currentLock();
  }

  /**
   * The reentrant lock `name` (Redisson RLock), with all its operations.
   * @example
   * const holds = await lockService.reentrant('report').getHoldCount();
   */
  reentrant(name: string): ReentrantLock {
    return this.client.getLock(name);
  }

  /**
   * The fair (FIFO) lock `name`.
   * @example
   * await lockService.fair('ticket-counter').withLock(() => serveNext());
   */
  fair(name: string, options?: FairLockOptions): FairLock {
    return this.client.getFairLock(name, options);
  }

  /**
   * The simple (`SET NX PX`, not re-entrant) lock `name`.
   * @example
   * await lockService.simple('sync:users').doWithLock((ctx) => (ctx.isSuccess ? syncUsers() : undefined));
   */
  simple(name: string, options?: SimpleLockOptions): SimpleLock {
    return this.client.getSimpleLock(name, options);
  }

  /**
   * Several locks held all-or-nothing (names are reentrant locks); acquired in a global order, so
   * overlapping multi-locks cannot deadlock.
   * @example
   * await lockService.multi([`account:${from}`, `account:${to}`]).withLock(() => transfer(from, to, amount));
   */
  multi(locks: (string | LockBase)[]): MultiLock {
    if (!Array.isArray(locks)) throw new LockOptionsError(messages.multiNeedsArray());
    return new MultiLock(locks.map((lock) => (typeof lock === 'string' ? this.client.getLock(lock) : lock)));
  }

  /**
   * RedLock `name` over the module's `redLock.masters`, or over the LockClients given (create them
   * with `createLockClient` or `connectRedLockMasters`; those are yours to close).
   * @example
   * const redLock = lockService.redLock('payout');
   * await redLock.withLock(() => payout(), { leaseTime: 10_000, waitTime: 2_000 });
   */
  redLock(name: string, clients?: LockClient[], options?: RedLockOptions): RedLock {
    if (clients) return new RedLock(clients, name, options);
    if (this.redLockMasters.clients.length === 0) throw new LockOptionsError(messages.noRedLockMasters(), name);
    const { instanceTimeout, driftFactor, restartQuarantine } = this.options.redLock ?? {};
    return new RedLock([...this.redLockMasters.clients], name, {
      instanceTimeout,
      driftFactor,
      restartQuarantine,
      ...options,
    });
  }

  /**
   * The read-write lock `name`: `readLock()` shared, `writeLock()` exclusive.
   * @example
   * const catalog = lockService.readWrite(`catalog:${id}`);
   * const item = await catalog.readLock().withLock(() => repo.get(id));
   */
  readWrite(name: string): ReadWriteLock {
    return this.client.getReadWriteLock(name);
  }

  /** What `names` of `kind` lock as one: a lock, a MultiLock of them, or a RedLock. */
  private targetOf(
    names: readonly string[],
    kind: LockKind,
    options: WithLockCallOptions,
  ): LockBase | MultiLock | RedLock {
    if (kind === 'redlock') {
      if (names.length > 1) throw new LockOptionsError(messages.redLockOneName(names.length), names.join('+'));
      return this.redLock(names[0]);
    }
    const { mode } = options;
    if (mode !== undefined && (kind !== 'reentrant' || (mode !== 'read' && mode !== 'write'))) {
      throw new LockOptionsError(messages.badMode(String(mode)), names.join('+'));
    }
    const one = (name: string): LockBase =>
      mode === undefined ? this.lockOf(name, { ...options, kind }) : this.readWrite(name)[`${mode}Lock`]();
    return names.length === 1 ? one(names[0]) : new MultiLock(names.map(one));
  }

  /** The lock object of `options.kind` for `name`. */
  private lockOf(name: string, options: LockCallOptions): LockBase {
    switch (this.singleKindOf(options)) {
      case 'fair':
        return this.client.getFairLock(name);
      case 'simple':
        // The simple lock has its own default lease; 'watchdog' has to be asked for when it is built.
        return this.client.getSimpleLock(name, {
          leaseTime:
            (options.leaseTime === undefined ? this.options.leaseTime : options.leaseTime) === 'watchdog'
              ? 'watchdog'
              : undefined,
        });
      default:
        return this.client.getLock(name);
    }
  }

  private kindOf(options: { kind?: LockKind }): LockKind {
    const kind = options.kind ?? 'reentrant';
    if (!LOCK_KINDS.includes(kind)) {
      throw new LockOptionsError(`${messages.badKind(LOCK_KINDS, String(kind))}.`);
    }
    return kind;
  }

  /** `lock`, `tryLock`, `unlock`, `forceUnlock`: one name, one handle, so no RedLock. */
  private singleKindOf(options: { kind?: LockKind }): SingleLockKind {
    const kind = options.kind ?? 'reentrant';
    if (!SINGLE_LOCK_KINDS.includes(kind as SingleLockKind)) {
      throw new LockOptionsError(`${messages.badKind(SINGLE_LOCK_KINDS, String(kind))}.`);
    }
    return kind as SingleLockKind;
  }

  /**
   * What ends a wait of this call at shutdown: the module's shutdown; inside a handler's call (a request
   * in flight, which closing the server waits for) the start of closing already, as for the handler's
   * own lock (see LockLifecycle.handlerWaits), or app.close() would wait for a lock held elsewhere.
   * Once closing has started, such a call waits no more (see closingInHandler).
   * @internal
   */
  shutdownSignal(): AbortSignal {
    const { handlerWaits, signal } = this.lifecycle;
    return !handlerWaits.aborted && inHandlerCall() ? handlerWaits : signal;
  }

  /**
   * Closing has started and this call runs inside a handler's (a request in flight, which closing the
   * server waits for): it makes a single attempt, and a lock held elsewhere is LockModuleClosedError.
   */
  private closingInHandler(): boolean {
    return this.lifecycle.handlerWaits.aborted && !this.lifecycle.signal.aborted && inHandlerCall();
  }

  /**
   * Once shutdown has started, whether acquiring `names` as `options` says, here, re-enters a hold of
   * the current call chain (see reenters): what locked work still running then may still do. False
   * before shutdown (nothing to tell apart then). Call it inside the section (asCriticalSection).
   * @internal
   */
  reentersAfterShutdown(names: string | readonly string[], options: WithLockCallOptions): boolean {
    if (!this.shutdownSignal().aborted || options.permits !== undefined) return false;
    return reenters(this.targetOf(lockNames(names), this.kindOf(options), options), options);
  }

  /**
   * `take` with the engine's options for this call (see acquireOptions), its listening on the shutdown
   * signal stopped once `take` settled. `reentry`: whether the call re-enters a hold of its own call
   * chain, asked only once shutdown has started.
   */
  private async acquiring<T>(
    name: string,
    options: LockCallOptions | WithLockCallOptions,
    signalEndsAtShutdown: boolean,
    take: (acquire: AcquireOptions) => Promise<T>,
    reentry: () => boolean = () => false,
  ): Promise<T> {
    const once = this.closingInHandler();
    const { acquire, stop } = this.acquireOptions(
      name,
      options,
      signalEndsAtShutdown,
      this.shutdownSignal().aborted && reentry(),
    );
    if (once) acquire.waitTime = 0;
    // A wait closing will cut short: counted, so that its handler can answer before the servers close.
    const handlerWait = !once && inHandlerCall();
    if (handlerWait) this.lifecycle.beginHandlerWait();
    try {
      return await take(acquire);
    } catch (error) {
      // Busy, and closing does not let it wait: cut short, as a wait in progress then is.
      if (once && error instanceof LockAcquireTimeoutError && options.waitTime !== 0) {
        throw new LockModuleClosedError(messages.closing(name), name, { cause: error });
      }
      throw error;
    } finally {
      stop();
      if (handlerWait) this.lifecycle.endHandlerWait();
    }
  }

  /**
   * Call options over module defaults; `Infinity` / 'watchdog' become the engine's "omitted". Once
   * shutdown has started, refuses (and its signal cuts a wait short: `stop()` once the acquisition
   * settled, see untilShutdown); but not a re-entry (`reentry`): shutdown waits for the locked work
   * still running, which must keep re-entering what it holds until it ends.
   */
  private acquireOptions(
    name: string,
    options: LockCallOptions | WithLockCallOptions,
    signalEndsAtShutdown = false,
    reentry = false,
  ): { acquire: AcquireOptions; stop: () => void } {
    if (!reentry) this.lifecycle.assertOpen(name);
    const { waitTime, leaseTime, signal, owner, label } = options;
    const kindWait = this.kindOf(options) === 'simple' ? SIMPLE_LOCK_DEFAULTS.waitTime : undefined;
    // Only undefined means "not given": null or any other value is the caller's, checked by the engine.
    const wait = waitTime !== undefined ? waitTime : (this.options.waitTime ?? kindWait);
    const lease = leaseTime !== undefined ? leaseTime : this.options.leaseTime;
    // Only an AbortSignal is combined; anything else given as `signal` reaches the engine, which refuses it.
    const shutdown = this.shutdownSignal();
    const bound =
      reentry || signalEndsAtShutdown || (signal !== undefined && !(signal instanceof AbortSignal))
        ? { signal: signal ?? (reentry ? undefined : shutdown), stop: () => undefined }
        : untilShutdown(signal, shutdown);
    // Written out, not a rest copy of the call's options: the engine reads no other field, and the copy
    // was a few µs of every decorated call in a profile.
    const acquire: AcquireOptions = {
      owner,
      label,
      signal: bound.signal,
      waitTime: wait === Infinity ? undefined : wait,
      leaseTime: lease === 'watchdog' ? undefined : lease,
    };
    return { acquire, stop: bound.stop };
  }
}

/**
 * Whether acquiring `target` now re-enters a hold of the current call chain (its scope, or a section
 * around it): no explicit owner (whose holds this process cannot vouch for), and this client's record
 * says the chain holds it. Such a call waits for nobody.
 */
function reenters(target: LockBase | MultiLock | RedLock, options: { owner?: string }): boolean {
  const scope = currentScope();
  return options.owner === undefined && scope !== undefined && target.heldInScope(scope);
}

/** The names to lock: one, or several without repeats (a name given twice is locked once). */
function lockNames(name: string | readonly string[]): readonly string[] {
  if (typeof name === 'string') return [name];
  if (!Array.isArray(name) || name.length === 0 || name.some((n) => typeof n !== 'string')) {
    throw new LockOptionsError(messages.badLockNames());
  }
  return [...new Set(name as readonly string[])];
}
