import { monotonicNow } from '../util/clock';
import type { PubSub } from './pubsub';
import { WaitTicket } from './wait-ticket';
import { ChannelWaiters } from './channel-waiters';

export interface JoinOptions {
  /** Fair-lock waiter id: a message equal to it (or `<id>|<payload>`) wakes exactly this waiter. */
  waiterId?: string;
  /** Receives the waiter id and the payload of an addressed message for a waiter no longer here. */
  onUnclaimed?: (waiterId: string, payload: string) => void;
  /** Called for a message that arrives when this process has no waiter left on the channel. */
  onUnheard?: () => void;
  /** Parked waiters that heard nothing for this long try once more (see armRecheck). */
  quietRecheckMs?: number;
  /**
   * Every message wakes every waiter of this process on the channel, not just one: a release that
   * lets one of them in lets them all in (a read-write lock's readers).
   */
  broadcast?: boolean;
  /**
   * Waiters refused until a TTL runs out (a lease, another process's turn) retry one at a time: the
   * earliest retry due wakes the longest-parked waiter, the others sleep until a message. For locks
   * whose releases wake the waiting processes one waiter at a time (reentrant and simple): each waiter
   * retrying at its own TTL would send a burst of attempts from one process, all but one refused.
   */
  shareRetries?: boolean;
}

/**
 * How long a channel stays subscribed after its last local waiter left. A hot key keeps its
 * subscription instead of paying SUBSCRIBE + UNSUBSCRIBE around every contended acquisition.
 */
export const SUBSCRIPTION_LINGER_MS = 2_000;

/**
 * Every waiter of a client shares one subscriber connection, multiplexed across lock channels. A
 * channel is subscribed while it has local waiters, and unsubscribed a little after the last one left.
 */
export class LockWaiters {
  private readonly channels = new Map<string, ChannelWaiters>();

  /**
   * `redisPrefix`: the command connection's ioredis keyPrefix. The scripts publish on channels named
   * after their (prefixed) keys, so the subscriber listens on `redisPrefix + channel`, and a message
   * names its channel with the prefix.
   */
  constructor(
    private readonly pubsub: PubSub,
    private readonly redisPrefix = '',
  ) {
    const cut = redisPrefix.length;
    pubsub.listen(
      (channel, message, socketSince) => {
        if (cut > 0) channel = channel.startsWith(redisPrefix) ? channel.slice(cut) : '';
        this.channels.get(channel)?.deliver(message, socketSince);
      },
      () => this.channels.forEach((waiters) => waiters.wakeAll()),
    );
  }

  /**
   * Takes a seat on `channel`; the returned promise resolves once the subscription is live, so a
   * release that happens after it cannot be missed. Always `leave()` the ticket (also on error).
   * `onUnclaimed` receives the waiter id of an addressed message for a waiter no longer here.
   */
  join(channel: string, options: JoinOptions = {}): { ticket: WaitTicket; subscribed: Promise<unknown> } {
    let waiters = this.channels.get(channel);
    if (!waiters) {
      waiters = new ChannelWaiters();
      this.channels.set(channel, waiters);
    }
    if (options.onUnclaimed) waiters.onUnclaimed = options.onUnclaimed;
    if (options.onUnheard) waiters.onUnheard = options.onUnheard;
    if (options.quietRecheckMs !== undefined) waiters.quietRecheckMs = options.quietRecheckMs;
    if (options.broadcast) waiters.broadcast = true;
    if (options.shareRetries) waiters.sharesRetries = true;
    const ticket = new WaitTicket(waiters, options.waiterId, (t) => this.leave(channel, t));
    waiters.add(ticket);
    // A pending linger check stays: it finds the channel in use and does nothing.
    return { ticket, subscribed: this.subscribe(channel, waiters) };
  }

  /** Subscribes `channel` again if its last SUBSCRIBE failed (a failover) while waiters remain. */
  resubscribe(channel: string): void {
    const waiters = this.channels.get(channel);
    if (waiters && waiters.members.size > 0) void this.subscribe(channel, waiters).catch(() => undefined);
  }

  private subscribe(channel: string, waiters: ChannelWaiters): Promise<unknown> {
    if (!waiters.subscribed) {
      const subscribe = waiters.operation.then(() => this.pubsub.subscribe(this.redisPrefix + channel));
      waiters.subscribed = subscribe;
      waiters.operation = subscribe.then(
        () => void (waiters.live = waiters.subscribed === subscribe),
        () => void (waiters.subscribed === subscribe && (waiters.subscribed = undefined)),
      );
    }
    return waiters.subscribed;
  }

  /** Wakes the longest-parked waiter of this process on `channel`; false when none is parked. */
  wakeParked(channel: string): boolean {
    return this.channels.get(channel)?.wakeFirstParked() ?? false;
  }

  /** How many waiters of this process wait on `channel` (busy retrying or parked). */
  memberCount(channel: string): number {
    return this.channels.get(channel)?.members.size ?? 0;
  }

  /**
   * Whether `channel` is subscribed right now: then a release published after this moment reaches
   * us, and a waiter that joins before its first attempt needs no second attempt after subscribing.
   */
  isLive(channel: string): boolean {
    return this.channels.get(channel)?.live === true;
  }

  /** Drops pending unsubscribes (the connection is about to close anyway). */
  close(): void {
    for (const waiters of this.channels.values()) {
      clearTimeout(waiters.lingerTimer);
      waiters.stopRechecks();
    }
  }

  /** Waiters of this client on every channel (busy retrying or parked). */
  get waitingCount(): number {
    let count = 0;
    for (const waiters of this.channels.values()) count += waiters.members.size;
    return count;
  }

  /** Number of channels currently subscribed or being subscribed (for tests and health). */
  get channelCount(): number {
    return this.channels.size;
  }

  private leave(channel: string, ticket: WaitTicket): void {
    const waiters = this.channels.get(channel);
    if (!waiters || !waiters.remove(ticket)) return;
    // A wake-up this waiter received but did not use belongs to the next one (a broadcast reached them all).
    if (ticket.holdsUnusedWake && !waiters.broadcast) waiters.deliver('');
    if (waiters.members.size > 0) return;
    waiters.stopRechecks();
    waiters.idleSince = monotonicNow();
    // One timer per idle spell, not one per wait: a hot key's waiters join and leave at every
    // acquisition, and a timer set and cleared each time is work for nothing.
    if (!waiters.lingerTimer) this.lingerCheck(channel, waiters, SUBSCRIPTION_LINGER_MS);
  }

  /** In `delayMs`: unsubscribes `channel` if it has had no waiter for SUBSCRIPTION_LINGER_MS by then. */
  private lingerCheck(channel: string, waiters: ChannelWaiters, delayMs: number): void {
    waiters.lingerTimer = setTimeout(() => {
      waiters.lingerTimer = undefined;
      if (waiters.members.size > 0) return; // in use again: its next idle spell checks anew
      const idleFor = monotonicNow() - waiters.idleSince;
      if (idleFor < SUBSCRIPTION_LINGER_MS) this.lingerCheck(channel, waiters, SUBSCRIPTION_LINGER_MS - idleFor);
      else this.unsubscribe(channel, waiters);
    }, delayMs);
    waiters.lingerTimer.unref();
  }

  private unsubscribe(channel: string, waiters: ChannelWaiters): void {
    if (waiters.members.size > 0) return;
    waiters.subscribed = undefined;
    waiters.live = false;
    const unsubscribe = waiters.operation
      .then(() => this.pubsub.unsubscribe(this.redisPrefix + channel))
      .catch(() => undefined);
    waiters.operation = unsubscribe;
    void unsubscribe.then(() => {
      if (waiters.members.size === 0 && !waiters.subscribed && this.channels.get(channel) === waiters) {
        this.channels.delete(channel);
      }
    });
  }
}
