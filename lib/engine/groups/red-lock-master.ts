import { monotonicNow } from '../util/clock';
import { bounded } from '../redis/bounded';
import { closedForGood } from '../redis/connection-end';
import { isOutage } from '../redis/outage';
import { retryWhileUnreachable } from '../redis/retry-while-unreachable';
import { lockKeys, type LockKeys } from '../redis/keys';
import type { EngineContext } from '../client/engine-context';
import type { RedisClient } from '../redis/redis-client';
import type { HeldLock, HoldOps } from '../holds/held-lock';
import { LockHandle, type ReleaseOutcome } from '../holds/lock-handle';
import type { ReleaseReplayer } from '../holds/recent-releases';
import { extendHold } from '../lock/lock-renewal';
import { HOLD_STATE, REDLOCK_GRANT, REDLOCK_RELEASE, type VoteWaiting } from '../scripts/catalog';
import { passWakeUp } from '../waiting/pass-wake-up';
import type { AttemptReply } from '../scripts/replies';

/** What a release of a vote answers (see redlock-release-3.lua). */
type VoteRelease = [status: 'released', listeners: number] | 'not-owner' | 'not-locked';

/**
 * One master's part in a RedLock of one name: its votes, each `SET NX PX` under a token unique to the
 * attempt (lua/redlock-grant-3.lua), released by compare-and-delete of that token
 * (lua/redlock-release-3.lua). A refused waiting vote registers its process in the simple lock's
 * waiting registry of the name, and a release wakes the longest-waiting process on its own channel
 * (processChannel), not every process that waits. A vote the round keeps is recorded in the master's client like
 * any hold (LockHandle, HeldLock): the client's watchdog renews it, `close()` reports it and releases it,
 * a release Redis cannot take is sent again, and a failover replays it (RecentReleases). The keys are a
 * simple lock's of the name, so a RedLock and a simple lock of one name on one master exclude each other.
 */
export class RedLockMaster implements ReleaseReplayer {
  readonly keys: LockKeys;
  /** Where a release on this master wakes this process's waiters (see wake-one-process.lua). */
  readonly processChannel: string;
  /** When a release announced here was last heard by another process (monotonicNow; -Infinity: never). */
  othersHeardAt = -Infinity;
  private readonly renewalKeys: readonly string[];
  private readonly ops: HoldOps = {
    release: (held, holdId) => this.releaseVote(held, holdId),
    extend: (held, leaseTime, onLanded) => extendHold(this.side, held, leaseTime, false, onLanded),
  };
  /** What extendHold asks of a lock. */
  private readonly side: Parameters<typeof extendHold>[0];

  constructor(
    private readonly engine: EngineContext,
    readonly name: string,
  ) {
    this.keys = lockKeys(engine.keyPrefix, name);
    this.processChannel = `${this.keys.channel}:${engine.clientId}`;
    this.renewalKeys = [this.keys.lock, this.keys.fence];
    this.side = {
      name,
      engine,
      bounded: (operation, what) => bounded(operation, engine.operationTimeout, { key: name, name: what }),
    };
  }

  /**
   * Asks for a vote under `token` (`waiting`: whether a refusal registers this process as waiting, see
   * VoteWaiting): the raw reply, neither bounded nor recorded (see RedLock.ask and follow). A
   * vote whose connection closes before its reply came, on a client that does not send again what was
   * in flight, never answers (ioredis drops it) and may have landed: it is taken back (see whenDropped).
   */
  grant(token: string, leaseMs: number, waiting: VoteWaiting): Promise<AttemptReply> {
    const { redis, idleKeyTtl, clientId } = this.engine;
    const sent = REDLOCK_GRANT.run(redis, this.keys, { token, leaseMs, idleKeyTtl, clientId, waiting });
    // Written now only when ready (else it waits in the offline queue, which a close keeps and sends
    // later); followed only on a connection that drops what was in flight (not ioredis's default).
    if (redis.status === 'ready' && dropsInFlight(redis)) whenDropped(redis, sent, () => this.undo(token, leaseMs));
    return sent;
  }

  /**
   * A vote a RedLock keeps, recorded as this client's hold (`sentAt`: when its grant was sent, on the
   * monotonic clock; `watched`: the watchdog renews it).
   */
  record(token: string, fencingToken: number, leaseMs: number, watched: boolean, sentAt: number): LockHandle {
    const held = this.engine.registry.record({
      name: this.name,
      key: this.keys.lock,
      owner: token,
      holdId: token,
      leaseMs,
      watched,
      fencingToken,
      renewal: 'string',
      renewalKeys: this.renewalKeys,
      ops: this.ops,
      sentAt,
      label: undefined,
      reentered: false,
    });
    // A watched vote is checked by the watchdog's renewal at every reconnect; one with a lease of its own
    // is checked here, so that a master restarted empty is not counted as holding it until the lease ends.
    if (!watched)
      afterReconnect(this.engine.redis, { check: () => this.checkVote(held), ended: () => this.ended(held) });
    return new LockHandle(held, token);
  }

  /** Released, lost, or no longer recorded (a release given up): nothing to check any more. */
  private ended(held: HeldLock): boolean {
    return held.released || held.lost || !this.engine.registry.isCurrent(held);
  }

  /** After a reconnect: a vote the master no longer has (restarted empty, or lost in a failover) is lost. */
  private async checkVote(held: HeldLock): Promise<void> {
    const { redis, operationTimeout } = this.engine;
    const state = HOLD_STATE.run(redis, this.keys, { holder: held.owner, kind: 'string' });
    const [, hold] = await bounded(state, operationTimeout, { key: this.name, name: 'redlock check' });
    if (hold !== held.owner && !this.ended(held)) held.markLost('not-owner');
  }

  /**
   * Takes back a vote nobody will use, in the background: one that came after its round was decided,
   * or whose reply never came (it may have landed). Sent again while the master cannot be reached,
   * until it lands or the lease it could hold has certainly ended. It names the token: it can only
   * ever delete that attempt's own hold.
   */
  undo(token: string, leaseMs: number): void {
    const { redis, operationTimeout } = this.engine;
    const until = monotonicNow() + leaseMs + operationTimeout;
    const options = { redis, operationTimeout, until, key: this.name, name: 'redlock undo' };
    void retryWhileUnreachable(() => this.send(token), options).catch(() => undefined);
  }

  /**
   * Releases the vote under `token` whose answer has not come yet (sent after its grant on the same
   * connection, it runs after it, except when the grant is refused NOSCRIPT and sent again as EVAL):
   * true when it was held and is released now. When the master cannot be reached, it goes on as an undo.
   */
  takeBack(token: string, leaseMs: number): Promise<boolean> {
    return this.send(token, false).then(
      (reply) => typeof reply !== 'string',
      () => {
        this.undo(token, leaseMs);
        return false;
      },
    );
  }

  /** @internal Sends a release again after a failover (see RecentReleases). */
  async replayRelease(holder: string): Promise<void> {
    await this.send(holder);
  }

  /**
   * Leaves the waiting registry (this process's waiters of the name gave up) and, the lock being free,
   * wakes the next waiting process: a release's wake-up is never spent on a process that no longer waits.
   */
  passWakeUp(): Promise<unknown> {
    return passWakeUp(this.engine, this.keys);
  }

  /** `announce`: a waiting process is woken (not for a vote taken back unanswered). */
  private send(token: string, announce = true): Promise<VoteRelease> {
    const { redis, publishCommand, clientId } = this.engine;
    const message = announce ? 'released' : '';
    return REDLOCK_RELEASE.run(redis, this.keys, { token, publish: publishCommand, message, clientId });
  }

  /**
   * Releases a recorded vote, announced on the unlock channel. Redis unreachable: sent again in the
   * background until it lands or the lease is over, and 'pending' now (the RedLock counts it as such).
   */
  private async releaseVote(held: HeldLock, which?: string): Promise<ReleaseOutcome> {
    if (held.released) return 'released';
    const { final, holdId } = held.beginRelease(which);
    const { redis, operationTimeout } = this.engine;
    let raw: VoteRelease;
    try {
      const sent = this.send(held.owner);
      raw = await bounded(sent, operationTimeout, { key: this.name, name: 'redlock release' });
    } catch (error) {
      if (!isOutage(error) || closedForGood(redis)) {
        held.releaseFailed(final, holdId);
        throw error;
      }
      void this.retryRelease(held, holdId);
      return 'pending';
    }
    return this.settle(held, holdId, raw, false);
  }

  private settle(held: HeldLock, holdId: string, raw: VoteRelease, repeated: boolean): ReleaseOutcome {
    if (typeof raw !== 'string') {
      // Another process than this one heard the announcement: it waits for the lock.
      if (raw[1] > 0) this.othersHeardAt = monotonicNow();
      held.markReleased();
      // Kept for a few seconds, to be sent again if a failover may have lost it (see RecentReleases).
      this.engine.recentReleases.note(this, held.key, held.owner, holdId, held.leaseMs);
      return 'released';
    }
    if (repeated) {
      // Gone: an earlier copy landed before its reply was lost, or the lease ran out.
      held.markReleased();
      return monotonicNow() < held.expiresAt ? 'released' : 'expired';
    }
    if (held.lost) held.forget();
    else held.markLost(raw === 'not-owner' ? 'not-owner' : 'lease-expired');
    return 'expired';
  }

  private async retryRelease(held: HeldLock, holdId: string): Promise<void> {
    const { redis, operationTimeout, logger } = this.engine;
    // The lease cannot outlast its last renewal's reply, which came within operationTimeout of the send.
    const until = held.expiresAt + operationTimeout;
    const options = { redis, operationTimeout, until, key: this.name, name: 'redlock release' };
    try {
      this.settle(held, holdId, await retryWhileUnreachable(() => this.send(held.owner), options), true);
    } catch (error) {
      held.forget(); // the lease is over (or Redis refused): nothing of ours is left to release
      logger.warn(`Gave up releasing RedLock "${this.name}" on a master: ${(error as Error).message}`);
    }
  }
}

/** Per connection, what to do for each command in flight that a close would leave unanswered for good. */
const inFlight = new WeakMap<RedisClient, Set<() => void>>();

/**
 * Runs `onDropped` if `redis` closes before `sent` settles and ioredis will not send it again
 * (`autoResendUnfulfilledCommands: false`: it replaces its command queue on reconnect, and the command's
 * promise never settles). With the default, the command is sent again after the reconnect and answers.
 * One 'close' listener per connection, however many commands are in flight.
 */
function whenDropped(redis: RedisClient, sent: Promise<unknown>, onDropped: () => void): void {
  let pending = inFlight.get(redis);
  if (!pending) {
    const commands = (pending = new Set());
    inFlight.set(redis, commands);
    redis.on('close', () => {
      if (!dropsInFlight(redis)) return;
      for (const dropped of [...commands]) {
        commands.delete(dropped);
        dropped();
      }
    });
  }
  const commands = pending;
  commands.add(onDropped);
  const settled = (): void => void commands.delete(onDropped);
  sent.then(settled, settled);
}

/**
 * Whether `redis` drops the commands in flight when its connection closes (`autoResendUnfulfilledCommands:
 * false`) instead of sending them again once reconnected. A Cluster's own options carry no such setting:
 * it routes (and re-sends) by itself.
 */
function dropsInFlight(redis: RedisClient): boolean {
  return (redis.options as { autoResendUnfulfilledCommands?: boolean }).autoResendUnfulfilledCommands === false;
}

/** A vote with a lease of its own: how to check it after a reconnect, and whether it ended. */
interface VoteCheck {
  check(): Promise<void>;
  ended(): boolean;
}

/** Per connection, the votes with a lease of their own to check after each reconnect (see record). */
const votesToCheck = new WeakMap<RedisClient, { checks: Set<VoteCheck>; sweepAt: number }>();

/**
 * Runs `vote.check` each time `redis` is ready again until the vote ended. One 'ready' listener per
 * connection, however many votes it carries; the votes that ended are dropped at each reconnect, and
 * whenever the record doubles (a connection that never drops keeps no ended vote for long).
 */
function afterReconnect(redis: RedisClient, vote: VoteCheck): void {
  let votes = votesToCheck.get(redis);
  if (!votes) {
    const { checks } = (votes = { checks: new Set<VoteCheck>(), sweepAt: 64 });
    votesToCheck.set(redis, votes);
    redis.on('ready', () => {
      for (const v of checks) {
        if (v.ended()) checks.delete(v);
        else void v.check().catch(() => undefined); // unanswered: its lease runs out as before
      }
    });
  }
  if (votes.checks.size >= votes.sweepAt) {
    for (const v of votes.checks) if (v.ended()) votes.checks.delete(v);
    votes.sweepAt = Math.max(64, votes.checks.size * 2);
  }
  votes.checks.add(vote);
}
