import type { HeldLock } from './held-lock';

/**
 * The explicit leases of one lock's holds lent in a turn (see LockTurns.lend). A lent hold keeps the
 * lease its grant set in Redis, which has run down a little since, while its holder is owed
 * `leaseTime` from its acquisition. Most lent holds are released long before the difference
 * matters, so nothing is sent for them. One still held halfway to the end of the lease it was lent
 * with is renewed to end when its own lease would (acquisition + leaseTime): not sooner, and not
 * later either, as a grant from Redis would. Until then its `expiresAt` is the earlier end, which its
 * expiry timer reports as a loss if the renewal never lands.
 *
 * One timer per lock, not one per lend: a lend follows the release of the hold lent before, so only
 * the latest lent hold can still be held.
 */
export class LentLeases {
  private latest?: HeldLock;
  /** When the latest hold's own lease ends, and when to renew it to end then. */
  private owedUntil = 0;
  private renewAt = 0;
  private timer?: NodeJS.Timeout;
  private timerAt = 0;

  /**
   * `renew`: sets `held`'s lease in Redis to end at `until` (ms since epoch), retrying while Redis
   * cannot be reached and the hold may still be there; true when it was there to renew.
   */
  constructor(private readonly renew: (held: HeldLock, until: number) => Promise<boolean>) {}

  /** `held` was lent, with an explicit lease, at `held.grantedAt`. */
  lent(held: HeldLock): void {
    const acquiredAt = held.grantedAt;
    this.latest = held;
    this.owedUntil = acquiredAt + held.leaseMs;
    this.renewAt = acquiredAt + (held.expiresAt - acquiredAt) / 2;
    // Pushed back by nothing in a loop (each lend's renewal falls later); brought forward for a shorter
    // lease lent after a longer one.
    if (this.timer === undefined || this.renewAt < this.timerAt) this.arm(this.renewAt - Date.now());
  }

  /** `held`'s lease was set in Redis since it was lent (`extend()`, a re-entry): it is owed nothing more. */
  extended(held: HeldLock): void {
    if (this.latest === held) this.latest = undefined;
  }

  private arm(delay: number): void {
    clearTimeout(this.timer);
    this.timerAt = Date.now() + delay;
    this.timer = setTimeout(() => this.due(), Math.max(0, delay));
    this.timer.unref(); // a process that holds a lock and does nothing else may exit: the lease ends
  }

  private due(): void {
    this.timer = undefined;
    const held = this.latest;
    if (held === undefined || held.released || held.lost) {
      this.latest = undefined;
      return;
    }
    const wait = this.renewAt - Date.now();
    if (wait > 0) return this.arm(wait); // a hold lent since the timer was set
    this.latest = undefined;
    void this.send(held, this.owedUntil);
  }

  private async send(held: HeldLock, until: number): Promise<void> {
    try {
      if (await this.renew(held, until)) held.leaseApplied(until);
      else if (!held.released) held.markLost('not-owner');
    } catch {
      // Redis stayed unreachable: the hold keeps the lease it was lent with, whose end its expiry timer reports.
    }
  }
}
