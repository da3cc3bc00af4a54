import { randomUUID } from 'node:crypto';
import type { Attempt } from '../waiting/acquire-loop';
import { MAX_LEASE_MS } from '../util/validation';
import type { EngineContext } from '../client/engine-context';
import { LockOptionsError } from '../errors';
import type { RenewalKind } from '../holds/held-lock';
import { semaphoreKeys, type SemaphoreKeys } from '../redis/keys';
import {
  attemptOutcome,
  LockBase,
  waitingFlag,
  type AttemptRequest,
  type Grant,
  type RawRelease,
  type WaitBehaviour,
} from '../lock/lock-base';
import type { LockKindName } from '../client/lock-events';
import { SEMAPHORE_ACQUIRE, SEMAPHORE_PASS, SEMAPHORE_RELEASE } from '../scripts/catalog';

/** semaphore-acquire-5.lua's refusal of an ask above the current limit (see PermitLock.attempt). */
const NEVER_GRANTABLE = -2;

/**
 * A semaphore's keys (see keys.ts) and `released`: the holds released lately, hold member -> until
 * when a repeat of its release still replies 'released' (see semaphore-release-5.lua).
 */
export type PermitKeys = SemaphoreKeys & { readonly released: string };

export function permitKeys(prefix: string, name: string): PermitKeys {
  const keys = semaphoreKeys(prefix, name);
  return { ...keys, released: `${keys.holds}:released` };
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
export class PermitLock extends LockBase {
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
      waiterHolds: holds,
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
    return {
      channel: this.groupChannel,
      onUnheard: () => void this.passOn(),
      quietRecheckMs: this.engine.quietRecheckMs,
    };
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
