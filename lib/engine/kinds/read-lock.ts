import { ReadWriteSide } from './read-write-side';
import type { Attempt } from '../waiting/acquire-loop';
import type { EngineContext } from '../client/engine-context';
import type { RenewalKind } from '../holds/held-lock';
import { attemptOutcome, type Grant, type WaitBehaviour, type AttemptRequest } from '../lock/lock-base';
import type { LockKindName } from '../client/lock-events';
import { ownerOfScope, type OwnerScope } from '../holds/owner-scope';
import { claimedGrant } from '../holds/hold-id-calls';
import { READ_CLAIM_ATTEMPT, READ_HOLD_COUNT, READ_LOCK, READ_PTTL } from '../scripts/catalog';

/**
 * The read side of a ReadWriteLock (get it with `readLock()`). Its fencing token is the one of the
 * last write granted before it (0 if none): the version of the data it reads.
 */
export class ReadLock extends ReadWriteSide {
  readonly kind: LockKindName = 'read';
  protected readonly renewal: RenewalKind = 'read';

  constructor(engine: EngineContext, name: string) {
    super(engine, name, 'read');
  }

  /** A writer reads inside its own critical section too: its scope re-enters the read side. */
  protected override holdsAsScope(scope: OwnerScope): boolean {
    const writer = this.engine.registry.get(this.rw.write, ownerOfScope(scope, this.engine.clientId));
    return (writer !== undefined && !writer.lost) || super.holdsAsScope(scope);
  }

  protected override get renewalKeys(): readonly string[] {
    return (this.readKeys ??= [this.rw.readers, this.rw.readCounts, this.rw.readGrants, this.rw.fence]);
  }

  private readKeys?: readonly string[];

  protected async attempt({ owner, leaseMs, holdId }: AttemptRequest): Promise<Attempt<Grant>> {
    const [status, value] = await READ_LOCK.run(this.engine.redis, this.rw, {
      leaseMs,
      owner,
      holdId,
      idleKeyTtl: this.engine.idleKeyTtl,
    });
    return attemptOutcome(status, value);
  }

  /** A release that may let readers in lets them all in: every waiting reader of a process wakes. */
  protected override waitBehaviour(): WaitBehaviour {
    return { channel: this.rw.readChannel, broadcast: true };
  }

  /** Readers register nothing while they wait: nothing to undo. */
  protected override async abandonWait(): Promise<void> {}

  /** Claims the unanswered attempt's read hold if it landed and is live, or cancels the attempt for good. */
  protected async grantOfUnknownAttempt(holder: string, holdId: string): Promise<Grant | undefined> {
    return claimedGrant(await READ_CLAIM_ATTEMPT.run(this.engine.redis, this.rw, { holdId, owner: holder }));
  }

  /** How many read holds the current scope's owner (or `owner`) has; 0 when none, or once its hold ran out. */
  async getHoldCount(owner = this.scopeOwner()): Promise<number> {
    if (owner === undefined) return 0;
    return this.bounded(READ_HOLD_COUNT.run(this.engine.redis, this.rw, { owner }), 'getHoldCount');
  }

  /** Whether any read hold is live. */
  override async isLocked(): Promise<boolean> {
    return (await this.remainTimeToLive()) > 0;
  }

  /** What is left of the longest live read hold, in ms; -2 when none is live. */
  override remainTimeToLive(): Promise<number> {
    return this.bounded(READ_PTTL.run(this.engine.redis, this.rw, {}), 'remainTimeToLive');
  }

  /** Deletes every read hold, whoever holds them, and wakes the waiting writers. True when read-locked. */
  override forceUnlock(): Promise<boolean> {
    return this.forceSide('read');
  }
}
