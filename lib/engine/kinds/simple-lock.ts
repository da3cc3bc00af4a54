import { randomUUID } from 'node:crypto';
import type { LockKindName } from '../client/lock-events';
import type { Attempt } from '../waiting/acquire-loop';
import type { EngineContext } from '../client/engine-context';
import type { HeldLock, RenewalKind } from '../holds/held-lock';
import { LockNotHeldError } from '../errors';
import type { LockKeys } from '../redis/keys';
import {
  attemptOutcome,
  LockBase,
  type Grant,
  type RawRelease,
  type AttemptRequest,
  waitingFlag,
} from '../lock/lock-base';
import type { LockContext, ReleaseOutcome } from '../holds/lock-handle';
import { assertAcquireOptions, type AcquireOptions } from '../lock/acquire-options';
import { assertOptionsObject, checkDuration, LEASE_RULE, WAIT_RULE } from '../util/validation';
import { runInLockScope } from '../holds/owner-scope';
import { withLock } from '../lock/with-lock';
import type { HandOver } from '../turns/process-turns';
import { SIMPLE_CLAIM, SIMPLE_LOCK, SIMPLE_UNLOCK } from '../scripts/catalog';
import { claimedGrant } from '../holds/hold-id-calls';

/**
 * The length of the id that opens every token (a UUID). A token is `<id>:<owner id>`: the owner is all
 * that follows, compared whole (lua/simple-unlock-5.lua), so no owner id is ever read as a prefix of another.
 */
const ID_LENGTH = 36;

/** The keys the release script takes: the lock's, and its record of recent releases (see lua/include/release-once.lua). */
type ReleaseKeys = LockKeys & { readonly released: string };

/** The seed's defaults: wait up to 3 s, hold for 3 s. */
export const SIMPLE_LOCK_DEFAULTS = { waitTime: 3_000, leaseTime: 3_000 } as const;

export interface SimpleLockOptions {
  /** Default lease, or 'watchdog' to renew while held. Default 3000 ms. */
  leaseTime?: number | 'watchdog';
  /** Default wait of `doWithLock`. Default 3000 ms. */
  waitTime?: number;
}

/** What `doWithLock`'s callback learns: whether it got the lock, and if so the lock's context. */
export type SimpleLockContext = ({ isSuccess: true } & LockContext) | { isSuccess: false };

/**
 * The cheapest kind: `SET key token PX lease NX`, released by compare-and-delete. Not re-entrant
 * (a second acquisition by the same owner waits like anyone else). The token is unique to each
 * acquisition and names its owner (`<id>:<owner id>`), so any process can release an owner's hold by
 * owner. Waiters sleep on the same pub/sub notifications as the reentrant lock.
 * @example
 * const done = await locks.getSimpleLock('sync:users').doWithLock(async (ctx) => {
 *   if (!ctx.isSuccess) return false;
 *   await syncUsers(ctx.signal);
 *   return true;
 * });
 */
export class SimpleLock extends LockBase {
  readonly kind: LockKindName = 'simple';
  protected override readonly takesTurns: boolean = true;
  protected override readonly defaultLeaseTime: number | undefined;
  private readonly defaultWaitTime: number;
  private readonly releaseKeys: ReleaseKeys;

  constructor(engine: EngineContext, name: string, options: SimpleLockOptions = {}) {
    super(engine, name);
    this.releaseKeys = { ...this.keys, released: `${this.keys.lock}:releases` };
    const leaseTime = options.leaseTime === undefined ? SIMPLE_LOCK_DEFAULTS.leaseTime : options.leaseTime;
    const lease = { ...LEASE_RULE, watchdog: true };
    this.defaultLeaseTime = leaseTime === 'watchdog' ? undefined : checkDuration(name, 'leaseTime', leaseTime, lease);
    this.defaultWaitTime =
      checkDuration(name, 'waitTime', options.waitTime, WAIT_RULE) ?? SIMPLE_LOCK_DEFAULTS.waitTime;
  }

  /**
   * Tries for `waitTime` (default 3 s), runs `fn` either way and tells it whether the lock was
   * obtained (`ctx.isSuccess`); releases the lock afterwards.
   */
  doWithLock<T>(fn: (context: SimpleLockContext) => Promise<T> | T, options: AcquireOptions = {}): Promise<T> {
    return runInLockScope(async () => {
      assertOptionsObject(this.name, options);
      const waitTime = options.waitTime === undefined ? this.defaultWaitTime : options.waitTime;
      const handle = await this.tryLock({ ...options, waitTime });
      if (!handle) return fn({ isSuccess: false });
      const context: SimpleLockContext = {
        isSuccess: true,
        signal: handle.signal,
        fencingToken: handle.fencingToken,
        extend: (leaseTime) => handle.extend(leaseTime),
      };
      return withLock(
        async () => handle,
        () => fn(context),
        { logger: this.engine.logger, nameOf: () => this.name },
      );
    });
  }

  /**
   * Releases the hold of the current scope's owner (or `owner`): the one this client recorded, or else
   * the one Redis has for exactly that owner, whichever process took it.
   * @throws LockNotHeldError when that owner holds nothing (a holder `job:2` is never `job`'s)
   */
  override async unlock(options: { owner?: string } = {}): Promise<ReleaseOutcome> {
    assertOptionsObject(this.name, options);
    if (options.owner !== undefined) assertAcquireOptions(this.name, { owner: options.owner });
    const owner = options.owner ?? this.scopeOwner();
    if (owner === undefined || this.findHeld(owner)) return super.unlock(options);
    const callId = randomUUID(); // every repeat of this call carries it: one hold ends, whatever comes back
    const raw = await this.sendOnce(() => this.releaseOwnerHold(owner, callId));
    if (raw === 'not-locked' || raw === 'not-owner') throw new LockNotHeldError(this.name, owner);
    return 'released';
  }

  /** Each acquisition has its own token, naming its owner (see findHeld). */
  protected override holderFor(owner: string): string {
    return `${randomUUID()}:${owner}`;
  }

  protected attempt({ holder: token, leaseMs, waiting }: AttemptRequest): Promise<Attempt<Grant>> {
    const { redis, clientId, idleKeyTtl } = this.engine;
    // A `then`, not an async function: every acquisition makes this call.
    return SIMPLE_LOCK.run(redis, this.releaseKeys, {
      token,
      leaseMs,
      clientId,
      waiting: waitingFlag(waiting),
      idleKeyTtl,
    }).then((reply) => attemptOutcome(reply[0], reply[1], token, reply[2]));
  }

  protected releaseOnce(
    token: string,
    _leaseMs?: number,
    _holdId?: string,
    handOver: HandOver = 'pass',
  ): Promise<RawRelease> {
    const { redis, publishCommand, clientId } = this.engine;
    return SIMPLE_UNLOCK.run(redis, this.releaseKeys, {
      token,
      publish: publishCommand,
      message: 'released',
      handOver,
      clientId,
      owner: '',
      callId: '',
      turnMs: this.turnMsFor(handOver),
    });
  }

  /** Releases whatever hold Redis has for exactly `owner`, once: a repeat of the call (same id) changes nothing. */
  private releaseOwnerHold(owner: string, callId: string): Promise<RawRelease> {
    const { redis, publishCommand, clientId } = this.engine;
    return SIMPLE_UNLOCK.run(redis, this.releaseKeys, {
      token: '',
      publish: publishCommand,
      message: 'released',
      handOver: 'pass',
      clientId,
      owner,
      callId,
      turnMs: 0,
    });
  }

  protected readonly renewal: RenewalKind = 'string';

  /**
   * The unanswered attempt's token is the lock's value: it was granted. If not, the token is cancelled
   * (simple-claim-3.lua): a copy of the attempt still on its way takes nothing.
   */
  protected async grantOfUnknownAttempt(token: string): Promise<Grant | undefined> {
    const grant = claimedGrant(await SIMPLE_CLAIM.run(this.engine.redis, this.releaseKeys, { token }));
    return grant && { ...grant, holder: token };
  }

  /** Holds are recorded here under their acquisition's token, which names the owner. */
  protected override findHeld(owner: string): HeldLock | undefined {
    return this.engine.registry.find(this.keys.lock, (token) => namesOwner(token, owner));
  }
}

/** Whether `token` names exactly `owner`: the id, ':', then the owner, all of it. */
function namesOwner(token: string, owner: string): boolean {
  return token.length === ID_LENGTH + 1 + owner.length && token[ID_LENGTH] === ':' && token.endsWith(owner);
}
