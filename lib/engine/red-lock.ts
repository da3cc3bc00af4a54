import { randomUUID } from 'node:crypto';
import { bounded } from './bounded';
import { LockAcquireTimeoutError, LockLostError, LockOptionsError, LockQuorumError } from './errors';
import { assertLockName } from './keys';
import type { LockClient } from './lock-client';
import type { LockHandle, ReleaseOutcome } from './lock-handle';
import { GroupLock, type GroupLockHandle } from './group-lock';
import { assertAcquireOptions, assertDuration, type AcquireOptions } from './options';
import type { SimpleLock } from './simple-lock';
import type { WaitTicket } from './waiters';

export interface RedLockOptions {
  /** Longest wait for one master's answer; much shorter than the lease. Default lease / 20, within 5-250 ms. */
  instanceTimeout?: number;
  /** Clock drift allowance as a fraction of the lease (plus 2 ms). Default 0.01. */
  driftFactor?: number;
}

/**
 * A RedLock acquisition: held on at least a quorum of the masters. Valid until `validUntil`
 * (lease - elapsed - drift) unless extended; `signal` aborts once fewer than a quorum still hold it.
 * RedLock has no single fencing token (each master counts on its own): the tokens are per master.
 */
export class RedLockHandle implements GroupLockHandle, AsyncDisposable {
  private readonly controller = new AbortController();
  private expiryTimer?: NodeJS.Timeout;

  constructor(
    private readonly redLock: RedLock,
    readonly handles: (LockHandle | null)[],
    public validUntil: number,
    private readonly watched: boolean,
  ) {
    for (const handle of handles) handle?.signal.addEventListener('abort', () => this.checkQuorum(), { once: true });
    this.armExpiry();
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  get fencingTokens(): (number | null)[] {
    return this.handles.map((h) => h?.fencingToken ?? null);
  }

  /** Milliseconds of guaranteed validity left (0 when none). */
  get validity(): number {
    return Math.max(0, this.validUntil - Date.now());
  }

  async release(): Promise<ReleaseOutcome> {
    clearTimeout(this.expiryTimer);
    const outcomes = await Promise.all(
      this.handles.map((h) =>
        h ? h.release().catch((): ReleaseOutcome => 'expired') : Promise.resolve<ReleaseOutcome>('expired'),
      ),
    );
    return outcomes.filter((o) => o !== 'expired').length >= this.redLock.quorum ? 'released' : 'expired';
  }

  /** Extends on every master that still holds it; throws LockLostError unless a quorum confirms. */
  async extend(leaseTime?: number): Promise<void> {
    const started = Date.now();
    const lease = leaseTime ?? this.redLock.leaseOf(undefined);
    const results = await Promise.all(
      this.handles.map((h) =>
        h
          ? h.extend(leaseTime).then(
              () => true,
              () => false,
            )
          : Promise.resolve(false),
      ),
    );
    if (results.filter(Boolean).length < this.redLock.quorum) {
      this.lose();
      throw new LockLostError(this.redLock.name, 'redlock', 'not-owner');
    }
    this.validUntil = started + lease - this.redLock.drift(lease);
    this.armExpiry();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.release();
  }

  private armExpiry(): void {
    clearTimeout(this.expiryTimer);
    if (this.watched) return;
    this.expiryTimer = setTimeout(() => this.lose('lease-expired'), Math.max(0, this.validUntil - Date.now()));
    this.expiryTimer.unref();
  }

  private checkQuorum(): void {
    const alive = this.handles.filter((h) => h && !h.signal.aborted).length;
    if (alive < this.redLock.quorum) this.lose();
  }

  private lose(reason: 'not-owner' | 'lease-expired' = 'not-owner'): void {
    clearTimeout(this.expiryTimer);
    if (!this.controller.signal.aborted) this.controller.abort(new LockLostError(this.redLock.name, 'redlock', reason));
  }
}

/**
 * RedLock over N independent masters (one LockClient each): acquire on all in parallel with a short
 * per-master timeout, succeed on a majority with validity = lease - elapsed - drift, otherwise
 * release everywhere. Waits for another try on the masters' unlock notifications, not a fixed poll.
 * @example
 * const redLock = new RedLock(fiveClients, 'pview');
 * await redLock.withLock(async () => incrementCounter(), { leaseTime: 5_000, waitTime: 10_000 });
 */
export class RedLock extends GroupLock<RedLockHandle> {
  readonly quorum: number;
  private readonly instanceTimeout?: number;
  private readonly driftFactor: number;

  constructor(
    readonly clients: LockClient[],
    readonly name: string,
    options: RedLockOptions = {},
  ) {
    super();
    if (!Array.isArray(clients) || clients.length === 0)
      throw new LockOptionsError('RedLock needs at least one LockClient.', name);
    assertLockName(name);
    assertDuration(name, 'instanceTimeout', options.instanceTimeout, { positive: true });
    if (options.driftFactor !== undefined && !(options.driftFactor >= 0 && options.driftFactor < 1)) {
      throw new LockOptionsError(`driftFactor must be in [0, 1), got ${String(options.driftFactor)}.`, name);
    }
    this.quorum = Math.floor(clients.length / 2) + 1;
    this.instanceTimeout = options.instanceTimeout;
    this.driftFactor = options.driftFactor ?? 0.01;
  }

  /** @internal */
  leaseOf(leaseTime: number | undefined): number {
    return leaseTime ?? Math.min(...this.clients.map((c) => c.watchdogTimeout));
  }

  /** @internal */
  drift(lease: number): number {
    return Math.round(lease * this.driftFactor) + 2;
  }

  /** LockQuorumError when too few masters answer by the end of the wait. */
  protected async acquire(options: AcquireOptions): Promise<RedLockHandle | null> {
    assertAcquireOptions(this.name, options);
    const owner = options.owner ?? `redlock:${randomUUID()}`;
    const deadline = options.waitTime === undefined ? Infinity : Date.now() + options.waitTime;
    let tickets: WaitTicket[] | undefined;
    try {
      for (let failedRounds = 1; ; failedRounds++) {
        const round = await this.round(owner, options);
        if ('handle' in round) return round.handle;
        const remaining = deadline - Date.now();
        if (remaining <= 0) {
          // Out of time: say whether the masters refused (contention) or could not be reached.
          if (round.reachable < this.quorum) {
            throw new LockQuorumError(this.name, round.reachable, this.quorum, this.clients.length, round.cause);
          }
          return null;
        }
        if (!tickets) tickets = await this.joinAll();
        // Sleep until a master announces a release, or the shortest refusing lease ends.
        const sleep = Math.min(remaining, Math.max(1, round.retryAfter));
        const stop = new AbortController();
        const signal = options.signal ? AbortSignal.any([options.signal, stop.signal]) : stop.signal;
        await Promise.race(tickets.map((t) => t.wait(sleep, signal).catch(() => 'timeout')));
        stop.abort(); // unpark the tickets that did not win the race
        // Then a random pause, growing with failed rounds: contenders woken by the same release
        // would otherwise split the masters between them again and again (a RedLock livelock).
        await delay(Math.random() * Math.min(remaining, 250, 5 * 2 ** Math.min(failedRounds, 6)), options.signal);
        options.signal?.throwIfAborted();
      }
    } finally {
      tickets?.forEach((t) => t.leave());
    }
  }

  /** One parallel round over all masters. */
  private async round(
    owner: string,
    options: AcquireOptions,
  ): Promise<{ handle: RedLockHandle } | { retryAfter: number; reachable: number; cause?: unknown }> {
    const lease = this.leaseOf(options.leaseTime);
    const instanceTimeout = this.instanceTimeout ?? Math.max(5, Math.min(250, Math.floor(lease / 20)));
    const started = Date.now();
    const results = await Promise.allSettled(
      this.clients.map((client) =>
        bounded(
          this.instanceLock(client).lock({ owner, leaseTime: options.leaseTime, waitTime: 0 }),
          instanceTimeout,
          { key: this.name, name: 'redlock acquire' },
          (late) => void late.release().catch(() => undefined), // answered after we gave up on it
        ),
      ),
    );
    const handles = results.map((r) => (r.status === 'fulfilled' ? r.value : null));
    const acquired = handles.filter((h): h is LockHandle => h !== null);
    const validity = lease - (Date.now() - started) - this.drift(lease);
    if (acquired.length >= this.quorum && validity > 0) {
      return {
        handle: new RedLockHandle(this, handles, started + lease - this.drift(lease), options.leaseTime === undefined),
      };
    }
    await Promise.all(acquired.map((h) => h.release().catch(() => undefined)));
    const refusals = results.flatMap((r) =>
      r.status === 'rejected' && r.reason instanceof LockAcquireTimeoutError ? [r.reason] : [],
    );
    const unreachable = results.flatMap((r) =>
      r.status === 'rejected' && !(r.reason instanceof LockAcquireTimeoutError) ? [r.reason as unknown] : [],
    );
    // Refused: until the shortest holder's lease ends (or a release message). Not refused but not
    // answered in time either (a slow or dead master): try again soon rather than after a lease.
    const retryAfter =
      refusals.length > 0
        ? Math.min(...refusals.map((e) => e.retryAfterMs ?? lease), lease)
        : instanceTimeout * 2 + Math.floor(Math.random() * 50);
    return { retryAfter, reachable: this.clients.length - unreachable.length, cause: unreachable[0] };
  }

  /**
   * On each master, the classic algorithm's `SET NX PX` with a token unique to each attempt (our
   * simple lock): an attempt that answers after its round gave up can never stack onto a later
   * round's hold, and is released on its own. RedLock is therefore not re-entrant.
   */
  private instanceLock(client: LockClient): SimpleLock {
    return client.getSimpleLock(this.name, { leaseTime: 'watchdog' });
  }

  private async joinAll(): Promise<WaitTicket[]> {
    const seats = this.clients.map((client) => client.waiters.join(this.instanceLock(client).keys.channel));
    const tickets = seats.map((s) => s.ticket);
    // Masters that cannot subscribe just do not wake us; the lease-bound retry still does.
    await Promise.allSettled(
      seats.map((s, i) =>
        bounded(s.subscribed, this.clients[i].operationTimeout, { key: this.name, name: 'subscribe' }),
      ),
    );
    return tickets;
  }
}

function delay(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}
