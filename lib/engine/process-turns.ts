import type { Lendable } from './held-lock';

/**
 * How long a process keeps a contended reentrant or simple lock to itself before passing it on.
 * Long enough for many acquisitions of a hot key (an acquisition is a few round trips), short enough
 * that with eight processes taking turns the last in line waits about a tenth of a second (the
 * bench's hot key: max wait 125 ms, against 0.4-2.8 s for the polling locks).
 */
export const TURN_MS = 10;

/**
 * A turn whose holds are short goes on past turnTime until it has held the lock this many times, up
 * to TURN_STRETCH times turnTime. Passing the lock on costs about one acquisition's worth of wake-ups
 * and round trips: on the bench's hot key a 10 ms turn holds about 40 anyway, but with a 1 ms
 * critical section only about 6 (16 % of grants were moves; 9 % in turns of 12). Only while the hold
 * being released was short enough for this many to fit in the stretch (2.5 ms with the default
 * turnTime): a turn of longer holds, whose moves cost little next to them, is not held any longer.
 * With 16 the bar (1.9 ms) sat just above the 1 ms section's holds on a busy machine, which then
 * stretched only now and then (13-14 % of grants moved in a full run).
 */
export const TURN_MIN_HOLDS = 12;
export const TURN_STRETCH = 3;

/** Longest turnTime accepted: longer turns starve the other processes. */
export const MAX_TURN_MS = 60_000;

/**
 * Fencing tokens a hold takes when its process may lend it on in a turn other processes wait for (see
 * lent holds below): one for itself, the rest for the acquisitions of this process it is lent to.
 * Unused ones are skipped, so the counter grows faster than the number of grants: by at most this
 * many per contended turn on a hot key, and not at all where no other process waits.
 */
export const TURN_TOKENS = 32;

/**
 * A hold is lent on only this soon after Redis last confirmed it: one taken away meanwhile (a
 * forceUnlock, a failover that lost it) is lent on for no longer than this, where an attempt would
 * have been refused at once.
 */
export const LEND_WITHIN_MS = 1_000;

/** What a release asks of Redis: `keep` the lock in this process's turn, or `pass` it on. */
export type HandOver = 'keep' | 'pass';

interface Turn {
  readonly startedAt: number;
  /** Attempts this process made on the lock since the turn began (see passIfIdle). */
  attempts: number;
  /** First holds (not re-entries) this process was granted or lent in the turn, and when the last one was (see TURN_MIN_HOLDS). */
  holds: number;
  lastGrantAt: number;
  /** A release in this turn was kept: other processes wait for the lock. */
  contended: boolean;
  /** The last hold's release, not sent yet: it rides on this process's next attempt (see deferRelease). */
  deferred?: DeferredRelease;
  flushDeferred?: () => Promise<void>;
  flushTimer?: NodeJS.Timeout;
}

/** A release that waits for its process's next attempt on the lock, to be sent with it. */
export interface DeferredRelease {
  /** The lock kind that made it: only an attempt of the same kind can carry it. */
  readonly kind: string;
  readonly holder: string;
  /** The hold it ends (see lua/include/hold-ids.lua). */
  readonly holdId: string;
  readonly leaseMs: number;
  /** The hold's lease is renewed by the watchdog (no explicit leaseTime). */
  readonly watched: boolean;
  /** When Redis lets the hold's lease run out at the latest (ms since epoch). */
  readonly expiresAt: number;
  /** Set when the hold may be lent on to this process's next acquisition (see LockTurns.lend). */
  readonly lendable?: Lendable;
  /** Sends it on its own, when no attempt took it (the lock's, shared by its releases). */
  readonly send: (release: DeferredRelease) => Promise<void>;
}

/**
 * How long a deferred release waits for its process's next attempt: a loop asks again once the rest
 * of its work's replies are in (well under a millisecond on a healthy connection).
 */
export const DEFERRED_RELEASE_MS = 1;

/** Past this many entries, turns that are over anyway are swept (a lock whose hold was lost never ends its turn). */
const SWEEP_AT = 1_024;

/**
 * This process's turns on contended locks.
 *
 * Waking a waiter in another process costs more than the lock itself: a scheduler wake-up, a message
 * and an attempt, while the releasing process, still running, could have taken the lock again in one
 * round trip. So while other processes wait, a release inside this process's turn wakes nobody
 * (`keep`): the process takes the lock again at once (a loop) or one of its own waiters does (a
 * local hand-off, no message). Once the turn is over, the release passes the lock to the
 * longest-waiting process and reserves it for that process (`pass`, lua/include/hand-over.lua), so
 * turns go round the processes in the order they started waiting.
 *
 * Inside such a turn a release is deferred: it rides on the process's next attempt (deferRelease).
 * Better still, that next acquisition is often lent the hold as it stands in Redis (LockTurns.lend):
 * the lock never left the process, so no round trip is needed, only a fencing token, taken from a
 * block the hold set aside when Redis granted it (TURN_TOKENS). A reentrant hold that may be lent is
 * granted under an id of the process's own, never an owner's (a simple lock's token is its
 * acquisition's alone anyway). A lent explicit lease never lasts longer than its acquisition asked
 * for, and is renewed to last as long only if it is held long enough to need it (see LentLeases).
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

  /**
   * This process was granted lock `key` (a first hold, not a re-entry); `contended`: Redis said other
   * processes wait for it, so the turn's releases may be deferred from the first one on.
   */
  granted(key: string, contended = false): void {
    const turn = this.turns.get(key);
    const now = Date.now();
    if (turn) {
      turn.holds++;
      turn.lastGrantAt = now;
      if (contended) turn.contended = true;
      return;
    }
    if (this.turns.size >= SWEEP_AT) this.sweep();
    this.turns.set(key, { startedAt: now, attempts: 0, holds: 1, lastGrantAt: now, contended });
  }

  /** How the last release of a hold on `key` should leave the lock. */
  handOverFor(key: string): HandOver {
    const turn = this.turns.get(key);
    return turn !== undefined && this.goesOn(turn) ? 'keep' : 'pass';
  }

  /** Whether `turn` still runs: for turnTime, stretched while its holds are short (see TURN_MIN_HOLDS). */
  private goesOn(turn: Turn): boolean {
    const now = Date.now();
    const elapsed = now - turn.startedAt;
    if (elapsed < this.turnMs) return true;
    const longest = this.turnMs * TURN_STRETCH;
    if (turn.holds >= TURN_MIN_HOLDS || elapsed >= longest) return false;
    // The hold being released is short enough for TURN_MIN_HOLDS of them to fit in the stretch.
    return (now - turn.lastGrantAt) * TURN_MIN_HOLDS < longest;
  }

  /** A release in this turn was kept (other processes wait): later ones may be deferred. */
  kept(key: string): void {
    const turn = this.turns.get(key);
    if (turn) turn.contended = true;
  }

  /**
   * Whether the last release of a hold on `key` may wait for this process's next attempt: inside a
   * turn of a lock other processes wait for (they get it when the turn passes, not before), with no
   * other release waiting already.
   */
  mayDefer(key: string): boolean {
    const turn = this.turns.get(key);
    return turn !== undefined && turn.contended && turn.deferred === undefined && this.goesOn(turn);
  }

  /**
   * Holds back `release` (see mayDefer) until this process's next attempt on `key`, which sends it in
   * the same script (takeDeferred): one round trip instead of two for a loop that takes the lock
   * again, or for a waiter of this process that takes it next. If no attempt takes it within
   * DEFERRED_RELEASE_MS (a loop's next attempt comes after the rest of its work's replies, so not
   * within the macrotask), the process no longer asks for the lock: `release.send` releases it and
   * passes it on, and the turn is over.
   */
  deferRelease(key: string, release: DeferredRelease): void {
    const turn = this.turns.get(key);
    if (!turn) throw new Error(`no turn on ${key} to defer a release in`);
    turn.deferred = release;
    const flush = (turn.flushDeferred ??= () => this.flushDeferred(key, turn));
    this.idle.set(key, flush);
    // One timer per turn, pushed back at each deferral.
    if (turn.flushTimer) turn.flushTimer.refresh();
    else turn.flushTimer = setTimeout(() => void flush(), DEFERRED_RELEASE_MS);
  }

  private flushDeferred(key: string, turn: Turn): Promise<void> {
    if (this.idle.get(key) === turn.flushDeferred) this.idle.delete(key);
    const { deferred } = turn;
    if (!deferred) return Promise.resolve(); // an attempt carried it
    turn.deferred = undefined;
    if (this.turns.get(key) === turn) this.turns.delete(key);
    return deferred.send(deferred);
  }

  /**
   * Sends the release held back on `key`, if any, now and resolves once it has landed: this process's
   * own reads of the lock (isLocked, getHoldCount, inspect, …) must see its releases.
   */
  settle(key: string): Promise<void> {
    const turn = this.turns.get(key);
    return turn?.deferred && turn.flushDeferred ? turn.flushDeferred() : Promise.resolve();
  }

  /** Whether a release is held back on `key` for the next attempt of lock kind `kind`. */
  hasDeferred(key: string, kind: string): boolean {
    return this.turns.get(key)?.deferred?.kind === kind;
  }

  /** The release held back on `key` for an attempt of lock kind `kind`, taken by that attempt. */
  takeDeferred(key: string, kind: string): DeferredRelease | undefined {
    const turn = this.turns.get(key);
    const release = turn?.deferred;
    if (!release || release.kind !== kind) return undefined;
    turn.deferred = undefined;
    return release;
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
      // meanwhile needs no care: passing a lock that is held or reserved changes nothing.
      if (current !== undefined && (current !== turn || current.attempts !== seen)) return Promise.resolve();
      if (wanted()) return Promise.resolve();
      this.turns.delete(key);
      return pass();
    };
    this.idle.set(key, check);
    setImmediate(check);
  }

  /** Runs the passes and deferred releases still waiting for their macrotask now: the client is closing. */
  async flush(): Promise<void> {
    const pending = [...this.idle.values()];
    this.idle.clear();
    await Promise.all(pending.map((check) => check()));
  }

  /** Turns older than the longest a turn lasts are over: a release would pass the lock on with or without them. */
  private sweep(): void {
    const over = Date.now() - this.turnMs * TURN_STRETCH;
    for (const [key, turn] of this.turns) if (turn.startedAt < over && !turn.deferred) this.turns.delete(key);
  }
}
