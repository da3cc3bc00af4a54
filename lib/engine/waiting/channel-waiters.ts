import { monotonicNow } from '../util/clock';
import type { TicketSeat, WaitTicket } from './wait-ticket';

/**
 * A message `after:<ms>` tells this process to try the lock in `ms` milliseconds, not at once: another
 * process's turn keeps the free lock reserved until then (see lua/include/hand-over.lua keepTurn).
 */
export const TRY_AFTER = 'after:';

/** The local waiters of one channel. */
export class ChannelWaiters implements TicketSeat {
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
  onUnclaimed?: (waiterId: string, payload: string) => void;
  /** For a wake-up that finds no waiter of this process left (see join). */
  onUnheard?: () => void;
  /** See armRecheck. */
  quietRecheckMs?: number;
  /** Every message wakes every local waiter (see JoinOptions.broadcast). */
  broadcast = false;
  /** See JoinOptions.shareRetries. */
  sharesRetries = false;
  /** The shared retry (see retryIn), and when it is due (monotonicNow ms). */
  private retryTimer?: NodeJS.Timeout;
  private retryDue = 0;
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

  /** The longest-parked waiter tries in `ms`, unless a retry is due sooner (see JoinOptions.shareRetries). */
  retryIn(ms: number): void {
    const due = monotonicNow() + ms;
    if (this.retryTimer && this.retryDue <= due) return;
    clearTimeout(this.retryTimer);
    this.retryDue = due;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      this.wakeOne();
    }, ms);
    this.retryTimer.unref();
  }

  /** A message or a local wake-up came: whoever it wakes tries, and sets the next retry if refused. */
  private dropRetry(): void {
    clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
  }

  stopRechecks(): void {
    this.dropRetry();
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
  deliver(message: string, socketSince?: number): void {
    this.lastHeard = monotonicNow();
    this.dropRetry();
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
      const payload = message.slice(cut + 1);
      const addressed = this.byId.get(id);
      if (addressed) return addressed.notify({ text: payload, socketSince });
      if (this.onUnclaimed) return this.onUnclaimed(id, payload);
    }
    // A plain wake-up (reentrant and simple locks) for a process with no waiter left: pass it on.
    if (this.members.size === 0 && this.onUnheard) return this.onUnheard();
    this.wakeOne();
  }

  /** Wakes the longest-parked waiter; when everyone is busy retrying, keeps the wake-up for the next one to wait. */
  private wakeOne(): void {
    const first = this.parkedQueue[0];
    if (first) first.notify();
    else this.permits = Math.min(this.permits + 1, this.members.size); // bounded by the waiters
  }

  wakeFirstParked(): boolean {
    const first = this.parkedQueue[0];
    if (first) this.dropRetry();
    first?.notify();
    return first !== undefined;
  }

  wakeAll(): void {
    this.dropRetry();
    for (const ticket of this.members) ticket.notify();
  }
}
