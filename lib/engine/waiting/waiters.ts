import { monotonicNow } from '../util/clock';
import { onAbort } from './abort-fan-out';
import type { PubSub } from './pubsub';

export type WakeReason = 'notified' | 'timeout';

/**
 * A message `after:<ms>` tells this process to try the lock in `ms` milliseconds, not at once: another
 * process's turn keeps the free lock reserved until then (see lua/include/hand-over.lua keepTurn).
 */
const TRY_AFTER = 'after:';

/**
 * One waiter's seat on a lock channel. `wait()` sleeps until an unlock message picks this waiter or
 * the timeout passes; a wake-up that arrives while the waiter is busy retrying is kept for its next
 * `wait()`, so none is lost.
 */
export class WaitTicket {
  /** A wake-up received while not parked. */
  pending = false;
  /** What a message addressed to this waiter carried after its id (the fair lock's hand-off). */
  private payload?: string;
  private wake?: (reason: WakeReason) => void;

  constructor(
    private readonly channel: ChannelWaiters,
    /** Fair-lock waiter id: a message equal to it wakes exactly this waiter. */
    readonly id: string | undefined,
    private readonly onLeave: (ticket: WaitTicket) => void,
  ) {}

  get parked(): boolean {
    return this.wake !== undefined;
  }

  wait(timeoutMs: number, signal?: AbortSignal): Promise<WakeReason> {
    signal?.throwIfAborted();
    if (this.pending || this.channel.takePermit()) {
      this.pending = false;
      return Promise.resolve('notified');
    }
    return new Promise<WakeReason>((resolve, reject) => {
      const finish = (reason: WakeReason): void => {
        clearTimeout(timer);
        stopListening?.();
        this.wake = undefined;
        this.channel.unpark(this);
        resolve(reason);
      };
      const timer = setTimeout(() => finish('timeout'), Math.max(0, timeoutMs));
      const stopListening = signal
        ? onAbort(signal, () => {
            finish('timeout');
            reject(signal.reason);
          })
        : undefined;
      this.wake = finish;
      this.channel.park(this);
    });
  }

  /** Wakes this waiter now, or at its next wait(). */
  notify(payload?: string): void {
    if (payload !== undefined) this.payload = payload;
    if (this.wake) this.wake('notified');
    else this.pending = true;
  }

  /** The payload of the last message addressed to this waiter, once. */
  takePayload(): string | undefined {
    const payload = this.payload;
    this.payload = undefined;
    return payload;
  }

  leave(): void {
    this.onLeave(this);
  }
}

/** The local waiters of one channel. */
class ChannelWaiters {
  readonly members = new Set<WaitTicket>();
  /** Members with a waiter id, for addressed messages (one per id; a duplicate id waits its turn). */
  private readonly byId = new Map<string, WaitTicket>();
  private readonly parkedQueue: WaitTicket[] = [];
  private permits = 0;
  /** Serialises SUBSCRIBE / UNSUBSCRIBE of this channel. */
  operation: Promise<unknown> = Promise.resolve();
  subscribed?: Promise<unknown>;
  /** The SUBSCRIBE was confirmed (and no UNSUBSCRIBE has been sent since). */
  live = false;
  /** Checks, SUBSCRIPTION_LINGER_MS after the last waiter left, whether to UNSUBSCRIBE (see LockWaiters.leave). */
  lingerTimer?: NodeJS.Timeout;
  /** When the last waiter left (the channel has had no waiter since, unless `members` says otherwise). */
  idleSince = 0;
  /** For addressed messages (`<waiter id>|<payload>`) whose waiter is gone (see join). */
  onUnclaimed?: (waiterId: string) => void;
  /** For a wake-up that finds no waiter of this process left (see join). */
  onUnheard?: () => void;
  /** See armRecheck. */
  quietRecheckMs?: number;
  /** Every message wakes every local waiter (see JoinOptions.broadcast). */
  broadcast = false;
  private lastHeard = monotonicNow();
  private recheckTimer?: NodeJS.Timeout;
  /** Wakes a waiter when the turn another process reserved the lock for ends (see TRY_AFTER). */
  private tryTimer?: NodeJS.Timeout;

  add(ticket: WaitTicket): void {
    this.members.add(ticket);
    if (ticket.id !== undefined && !this.byId.has(ticket.id)) this.byId.set(ticket.id, ticket);
  }

  /** False when the ticket was not a member. */
  remove(ticket: WaitTicket): boolean {
    if (!this.members.delete(ticket)) return false;
    this.unpark(ticket);
    if (ticket.id !== undefined && this.byId.get(ticket.id) === ticket) {
      this.byId.delete(ticket.id);
      for (const other of this.members) {
        if (other.id === ticket.id) {
          this.byId.set(other.id, other);
          break;
        }
      }
    }
    return true;
  }

  park(ticket: WaitTicket): void {
    this.parkedQueue.push(ticket);
    this.lastHeard = monotonicNow(); // it has just tried the lock
    this.armRecheck();
  }

  /**
   * A wake-up goes to one process; should that process be frozen, or the message be lost, the lock
   * could sit free while every other waiter sleeps. So after `quietRecheckMs` in which no waiter of
   * this process was woken or tried, the longest parked one tries once more.
   */
  private armRecheck(): void {
    if (this.quietRecheckMs === undefined || this.recheckTimer) return;
    const due = Math.max(0, this.lastHeard + this.quietRecheckMs - monotonicNow());
    this.recheckTimer = setTimeout(() => {
      this.recheckTimer = undefined;
      const first = this.parkedQueue[0];
      if (!first) return;
      if (monotonicNow() - this.lastHeard >= this.quietRecheckMs!) first.notify();
      else this.armRecheck();
    }, due);
    this.recheckTimer.unref();
  }

  stopRechecks(): void {
    clearTimeout(this.recheckTimer);
    this.recheckTimer = undefined;
    clearTimeout(this.tryTimer);
    this.tryTimer = undefined;
  }

  /**
   * Another process's turn keeps the lock reserved for `ms` more (see TRY_AFTER): the longest-parked
   * waiter tries once it ends, unless a wake-up comes first. The timer runs here, so a stall of the
   * process whose turn it is cannot put it off.
   */
  private tryAfter(ms: number): void {
    // No waiter left: pass it on now (the next process in line is told instead).
    if (this.members.size === 0 && this.onUnheard) return this.onUnheard();
    this.tryTimer = setTimeout(() => {
      this.tryTimer = undefined;
      this.deliver('');
    }, ms + 1); // past the reservation's last millisecond
    this.tryTimer.unref();
  }

  unpark(ticket: WaitTicket): void {
    const index = this.parkedQueue.indexOf(ticket);
    if (index >= 0) this.parkedQueue.splice(index, 1);
  }

  takePermit(): boolean {
    if (this.permits === 0) return false;
    this.permits--;
    return true;
  }

  /**
   * One message wakes one local waiter: the one it names (a message is `<waiter id>` or
   * `<waiter id>|<payload>`), else the longest parked.
   */
  deliver(message: string): void {
    this.lastHeard = monotonicNow();
    // A wake-up replaces a pending try: the lock was passed on, or this is that try.
    clearTimeout(this.tryTimer);
    this.tryTimer = undefined;
    if (message.startsWith(TRY_AFTER)) {
      const ms = Number(message.slice(TRY_AFTER.length));
      if (Number.isFinite(ms) && ms >= 0) return this.tryAfter(ms);
    }
    if (this.broadcast) return this.wakeAll();
    if (this.byId.size > 0) {
      const target = this.byId.get(message);
      if (target) return target.notify();
    }
    const cut = message.lastIndexOf('|');
    if (cut >= 0 && (this.byId.size > 0 || this.onUnclaimed)) {
      const id = message.slice(0, cut);
      const addressed = this.byId.get(id);
      if (addressed) return addressed.notify(message.slice(cut + 1));
      if (this.onUnclaimed) return this.onUnclaimed(id);
    }
    // A plain wake-up (reentrant and simple locks) for a process with no waiter left: pass it on.
    if (this.members.size === 0 && this.onUnheard) return this.onUnheard();
    const first = this.parkedQueue[0];
    if (first) first.notify();
    // Everyone is busy retrying: keep the wake-up for the next one to wait (bounded by the waiters).
    else this.permits = Math.min(this.permits + 1, this.members.size);
  }

  wakeFirstParked(): boolean {
    const first = this.parkedQueue[0];
    first?.notify();
    return first !== undefined;
  }

  wakeAll(): void {
    for (const ticket of this.members) ticket.notify();
  }
}

export interface JoinOptions {
  /** Fair-lock waiter id: a message equal to it (or `<id>|<payload>`) wakes exactly this waiter. */
  waiterId?: string;
  /** Receives the waiter id of an addressed message for a waiter no longer here. */
  onUnclaimed?: (waiterId: string) => void;
  /** Called for a message that arrives when this process has no waiter left on the channel. */
  onUnheard?: () => void;
  /** Parked waiters that heard nothing for this long try once more (see armRecheck). */
  quietRecheckMs?: number;
  /**
   * Every message wakes every waiter of this process on the channel, not just one: a release that
   * lets one of them in lets them all in (a read-write lock's readers).
   */
  broadcast?: boolean;
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
      (channel, message) => {
        if (cut > 0) channel = channel.startsWith(redisPrefix) ? channel.slice(cut) : '';
        this.channels.get(channel)?.deliver(message);
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
    if (ticket.pending && !waiters.broadcast) waiters.deliver('');
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
