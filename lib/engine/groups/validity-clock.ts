import { monotonicNow } from '../util/clock';
import { MAX_TIMER_MS } from '../util/long-timer';

/** What the clock calls back once the end it was told has come: it checks its end again itself. */
export interface ValidityEnd {
  endCame(): void;
}

/**
 * One timer for the validity ends of every RedLock acquisition held in this process, armed for the
 * earliest: a lock taken and released in a loop would otherwise create and clear a timer (and Node's
 * list for its duration, which differs each time) at every acquisition. An end that moves later (a
 * renewal) leaves the timer where it is: it fires early, and is armed again for the earliest end then.
 */
class ValidityClock {
  /** Each acquisition watched, with the end it was last told (monotonicNow ms). */
  private readonly ends = new Map<ValidityEnd, number>();
  private timer?: NodeJS.Timeout;
  private armedFor = Infinity;

  /** `end.endCame()` is called at `at` (monotonicNow ms) or a little after, unless unwatched first. */
  watch(end: ValidityEnd, at: number): void {
    this.ends.set(end, at);
    if (at < this.armedFor) this.arm(at);
  }

  unwatch(end: ValidityEnd): void {
    this.ends.delete(end);
  }

  private arm(at: number): void {
    if (this.timer) clearTimeout(this.timer);
    this.armedFor = at;
    // At most setTimeout's limit (a longer delay fires after 1 ms): a later end is looked at again then.
    this.timer = setTimeout(this.fire, Math.min(MAX_TIMER_MS, Math.max(0, Math.ceil(at - monotonicNow()))));
    this.timer.unref();
  }

  private readonly fire = (): void => {
    this.timer = undefined;
    this.armedFor = Infinity;
    const now = monotonicNow();
    const came: ValidityEnd[] = [];
    let next = Infinity;
    for (const [end, at] of this.ends) {
      if (at <= now) came.push(end);
      else if (at < next) next = at;
    }
    for (const end of came) this.ends.delete(end);
    if (next < Infinity) this.arm(next);
    for (const end of came) end.endCame(); // may watch again (a later end), after the timer is armed
  };
}

/** The process's clock (see ValidityClock). */
export const validityClock = new ValidityClock();
