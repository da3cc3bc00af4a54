import { monotonicNow } from '../util/clock';

/**
 * How long a process keeps a contended reentrant or simple lock to itself before passing it on.
 * Long enough for many acquisitions of a hot key (an acquisition is a few round trips), short enough
 * that with N processes taking turns the last in line waits about N turns: a tenth of a second for
 * eight (docs/benchmarks.md measures it).
 */
export const TURN_MS = 10;

/**
 * A turn whose holds are short goes on past turnTime until it has held the lock this many times, up
 * to TURN_STRETCH times turnTime. The rule: passing the lock on costs about one acquisition's worth of
 * wake-ups and round trips, so a turn should hold the lock enough times to make that cost small. A
 * turn of long holds reaches that count within turnTime anyway; a turn of short ones (each shorter
 * than TURN_STRETCH × turnTime / TURN_MIN_HOLDS, 2.5 ms by default) is stretched up to that bound, and
 * no further: the stretch bounds every other process's wait. docs/benchmarks.md shows the share of
 * grants that moved between processes with and without it.
 */
export const TURN_MIN_HOLDS = 12;
export const TURN_STRETCH = 3;

/** Longest turnTime accepted: longer turns starve the other processes. */
export const MAX_TURN_MS = 60_000;

/** What a release asks of Redis: `keep` the lock in this process's turn, or `pass` it on. */
export type HandOver = 'keep' | 'pass';

interface Turn {
  readonly startedAt: number;
  /** Attempts this process made on the lock since the turn began (see passIfIdle). */
  attempts: number;
  /** First holds (not re-entries) this process was granted in the turn, and when the last one was (see TURN_MIN_HOLDS). */
  holds: number;
  lastGrantAt: number;
  /** The last release was kept, and no grant came since: the free lock is reserved for this process. */
  reserved: boolean;
  /** That release woke one of this process's parked waiters to take it (see wokeParked). */
  wokeParked: boolean;
}

/** Past this many entries, turns that are over anyway are swept (a lock whose hold was lost never ends its turn). */
const SWEEP_AT = 1_024;

/**
 * This process's turns on contended locks.
 *
 * Waking a waiter in another process costs more than the lock itself: a scheduler wake-up, a message
 * and an attempt, while the releasing process, still running, could take the lock again in one round
 * trip. So while other processes wait, a release inside this process's turn wakes nobody (`keep`):
 * the process takes the lock again at once (a loop) or one of its own waiters does (a local hand-off,
 * no message). Once the turn is over, the release passes the lock to the longest-waiting process and
 * reserves it for that process (`pass`, lua/include/hand-over.lua), so turns go round the processes in
 * the order they started waiting.
 *
 * Every release is sent when it is made, and every grant comes from Redis. A kept release leaves the
 * lock free in Redis, reserved for this process until the longest its turn can last (reservationMs),
 * and the next process in line is told to try then: should this process stall (a long synchronous
 * task, a GC pause), nothing it would do later is needed for the others to get the lock.
 *
 * A turn begins with a grant and ends with a pass, with a release that found nobody else waiting, or
 * when the process stops asking for the lock (passIfIdle).
 */
export class ProcessTurns {
  private readonly turns = new Map<string, Turn>();
  /** Passes that wait for the next macrotask (see passIfIdle), per lock key. */
  private readonly idle = new Map<string, () => Promise<void>>();

  /** `turnMs`: how long a turn lasts; 0 = every release passes the lock on. */
  constructor(private readonly turnMs: number = TURN_MS) {}

  /** Whether a release can ever keep a lock in its process's turn (`turnTime` 0: every release passes it on). */
  get keepsTurns(): boolean {
    return this.turnMs > 0;
  }

  /** This process is about to try lock `key`. */
  attempting(key: string): void {
    const turn = this.turns.get(key);
    if (turn) turn.attempts++;
  }

  /** This process was granted lock `key` (a first hold, not a re-entry). */
  granted(key: string): void {
    const turn = this.turns.get(key);
    const now = monotonicNow();
    if (turn) {
      turn.holds++;
      turn.lastGrantAt = now;
      turn.reserved = false;
      turn.wokeParked = false;
      return;
    }
    if (this.turns.size >= SWEEP_AT) this.sweep();
    this.turns.set(key, {
      startedAt: now,
      attempts: 0,
      holds: 1,
      lastGrantAt: now,
      reserved: false,
      wokeParked: false,
    });
  }

  /** How the last release of a hold on `key` should leave the lock. */
  handOverFor(key: string): HandOver {
    const turn = this.turns.get(key);
    return turn !== undefined && this.goesOn(turn) ? 'keep' : 'pass';
  }

  /** Whether `turn` still runs: for turnTime, stretched while its holds are short (see TURN_MIN_HOLDS). */
  private goesOn(turn: Turn): boolean {
    const now = monotonicNow();
    const elapsed = now - turn.startedAt;
    if (elapsed < this.turnMs) return true;
    const longest = this.turnMs * TURN_STRETCH;
    if (turn.holds >= TURN_MIN_HOLDS || elapsed >= longest) return false;
    // The hold being released is short enough for TURN_MIN_HOLDS of them to fit in the stretch.
    return (now - turn.lastGrantAt) * TURN_MIN_HOLDS < longest;
  }

  /** A release in this turn was kept: other processes wait, and the free lock is reserved for this one. */
  kept(key: string): void {
    const turn = this.turns.get(key);
    if (turn) turn.reserved = true;
  }

  /** The release just kept woke a parked waiter of this process, which takes the lock next. */
  wokeParked(key: string): void {
    const turn = this.turns.get(key);
    if (turn) turn.wokeParked = true;
  }

  /**
   * How long a new acquisition of `key` in this process should wait behind the parked waiter its last
   * release woke (the free lock is reserved for this process, and that waiter is on its way to take
   * it): until the reservation ends at most, since that waiter's release wakes the next parked one.
   * Undefined when no such waiter is on its way: the acquisition tries at once.
   */
  queueBehindWoken(key: string): number | undefined {
    const turn = this.turns.get(key);
    if (turn === undefined || !turn.wokeParked || !turn.reserved || !this.goesOn(turn)) return undefined;
    return this.reservationMs(key);
  }

  /**
   * How long a release kept now reserves the free lock for this process: until the latest its turn on
   * `key` can end (TURN_STRETCH times turnTime from its start). A turn that ends sooner passes the lock
   * on with its release, or at its next macrotask (passIfIdle), replacing the reservation; only a
   * process that cannot run meanwhile holds the others back for the rest of it.
   */
  reservationMs(key: string): number {
    const turn = this.turns.get(key);
    const end = (turn?.startedAt ?? monotonicNow()) + this.turnMs * TURN_STRETCH;
    return Math.max(1, Math.ceil(end - monotonicNow()));
  }

  /**
   * Whether this process's next attempt on `key` is all but sure to be granted: its last release was
   * kept in a turn that goes on, so the free lock is reserved for it.
   */
  expectsGrant(key: string): boolean {
    const turn = this.turns.get(key);
    return turn !== undefined && turn.reserved && !turn.wokeParked && this.goesOn(turn);
  }

  /** The lock was passed on, or nobody else waited for it: the turn is over. */
  end(key: string): void {
    this.turns.delete(key);
  }

  /**
   * After a release that kept the lock: unless this process asks for it again before its next
   * macrotask (a loop's next acquisition, or one of its waiters), it passes the lock on with `pass`.
   * `wanted`: whether waiters of this process still wait for it.
   */
  passIfIdle(key: string, wanted: () => boolean, pass: () => Promise<void>): void {
    const turn = this.turns.get(key);
    const seen = turn?.attempts;
    const check = () => {
      if (this.idle.get(key) === check) this.idle.delete(key);
      const current = this.turns.get(key);
      // Asked again (or a new turn began): that acquisition passes it on in its turn. A turn ended
      // meanwhile needs no care: passing a lock that is held or reserved for another changes nothing.
      if (current !== undefined && (current !== turn || current.attempts !== seen)) return Promise.resolve();
      if (wanted()) return Promise.resolve();
      this.turns.delete(key);
      return pass();
    };
    this.idle.set(key, check);
    setImmediate(check);
  }

  /** Runs the passes still waiting for their macrotask now: the client is closing. */
  async flush(): Promise<void> {
    const pending = [...this.idle.values()];
    this.idle.clear();
    await Promise.all(pending.map((check) => check()));
  }

  /** Turns older than the longest a turn lasts are over: a release would pass the lock on with or without them. */
  private sweep(): void {
    const over = monotonicNow() - this.turnMs * TURN_STRETCH;
    for (const [key, turn] of this.turns) if (turn.startedAt < over) this.turns.delete(key);
  }
}
