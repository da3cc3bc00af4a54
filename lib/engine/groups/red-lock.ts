import { randomUUID } from 'node:crypto';
import { bounded, boundedDeadline, boundedFailure } from '../redis/bounded';
import { LockError, LockLostError, LockOptionsError, LockQuorumError, RedisUnavailableError } from '../errors';
import { engineOf, isLockClient, type LockClient } from '../client/lock-client';
import type { LockHandle, ReleaseOutcome } from '../holds/lock-handle';
import { GroupLock } from './group-lock';
import type { LockLogger } from '../util/logger';
import { masterHealth, PROBE_INTERVAL_MS } from '../redis/master-health';
import { assertAcquireOptions, type AcquireOptions } from '../lock/acquire-options';
import { assertLockName, checkDuration, RESTART_QUARANTINE_RULE, show, TIMEOUT_RULE } from '../util/validation';
import { RedLockMaster } from './red-lock-master';
import type { EmitLockEvent } from '../client/lock-events';
import { monotonicNow } from '../util/clock';
import { RedLockHandle, type RedLockQuorum } from './red-lock-handle';
import { WaitRegistrations } from './wait-registrations';
import { delay, ReleaseWatch } from './release-watch';
import type { CombinedSignal } from '../waiting/abort-fan-out';
import type { AttemptReply } from '../scripts/replies';
import type { VoteWaiting } from '../scripts/catalog';

export interface RedLockOptions {
  /**
   * Longest wait for one master's answer; much shorter than the lease. Default lease / 20, within
   * 50-250 ms: below 50 ms a loaded but healthy master (or one still connecting) reads as down.
   */
  instanceTimeout?: number;
  /** Clock drift allowance as a fraction of the lease (plus 2 ms). Default 0.01. */
  driftFactor?: number;
  /**
   * How long a master that (re)started is kept out of the vote, in ms: no vote is asked of it until it
   * has been up this long (read with `INFO server` at each of its client's connections). A master
   * restarted without persistence has forgotten every hold, and would grant the lock to a contender
   * while its holder still counts on it; set this to the longest lease any contender uses (with a
   * watchdog, its `watchdogTimeout`) unless the masters persist every write (`appendfsync always`).
   * Masters started together keep the lock unavailable that long after they start. Standalone and
   * Sentinel clients only. Default 0: not kept out (RedLock as most libraries implement it).
   */
  restartQuarantine?: number;
}

/** A master's yes: the token its hold is under, and its fencing token. */
interface GrantedVote {
  token: string;
  fencingToken: number;
}

/** One master's answer in a round. */
type Vote = { index: number } & (
  | { granted: GrantedVote }
  | { refusedFor: number | undefined }
  // keptOut: up, but kept out of the vote after a restart (RedLockOptions.restartQuarantine)
  | { failed: unknown; skipped?: true; keptOut?: true }
);

/** A round that did not get the lock, and why. */
interface LostRound {
  /**
   * refused: someone holds it; split: contenders divided the masters; unreachable: too few answer;
   * late: a quorum granted after the lease's validity was over.
   */
  why: 'refused' | 'split' | 'unreachable' | 'late';
  /** The gate (a master's index) refused, and the other masters were not asked (see round). */
  gate?: number;
  retryAfter: number;
  reachable: number;
  /** Masters that answer but were kept out after a restart (counted out of `reachable`). */
  keptOut: number;
  cause?: unknown;
}

/**
 * How a round's votes wait if refused (see ask): undefined for a single attempt, which never registers
 * its process; else whether an earlier round of the wait lost (a refused vote may have registered its
 * process), whether the wait has joined its process's waiters (see watchReleases), and where the
 * wait's refusals registered its process.
 */
type RoundWaiting = { refusedBefore: boolean; member: boolean; registrations: WaitRegistrations } | undefined;

/**
 * A vote's waiting flag (see redlock-grant-3.lua), as waitingFlag gives a lock's attempt: `members`,
 * this process's waiters of the name on the master, counts the wait itself once it has joined.
 */
function voteWaiting(members: number, waiting: RoundWaiting): VoteWaiting {
  if (!waiting) return 'once';
  if (members > (waiting.member ? 1 : 0)) return '1';
  return waiting.refusedBefore ? '0' : '-';
}

/** Pause before trying again when too few masters can be reached. */
const UNREACHABLE_RETRY_MS = PROBE_INTERVAL_MS;
/**
 * How long a newcomer whose process waited for the lock last time lets the waiter a release woke go
 * first (see acquire): a few round trips and the pub/sub hop, with room for a busy machine.
 */
const POLITE_WAIT_MS = 3;
/** How long after another process heard a release of the lock a newcomer still lets it go first. */
const CONTENDED_MS = 50;
/** Pause when a refusing master did not say for how long (the key was released meanwhile). */
const UNKNOWN_TTL_RETRY_MS = 50;

/**
 * RedLock over N independent masters (one LockClient each): `SET NX PX` with a unique token on each
 * master, held once a majority said yes, with validity = lease - elapsed - drift; otherwise released
 * everywhere. A round is decided as soon as a quorum said yes or can no longer say yes, and skips
 * masters that are down (see MasterHealth), so a dead master costs nothing.
 *
 * The first round asks every master at once (one round trip). A waiter woken by a release asks the
 * first master that is up (the gate) before the others: the waiters woken by the same release meet
 * on the gate, one of them wins it and only that one asks the rest, so a herd never splits the
 * masters so that nobody gets a majority. A refused waiter costs one command. A gate that refuses
 * with no release announced for one instance timeout may hold a stale key (a contender that crashed
 * mid-round): the next round asks every master at once, as classic RedLock does, so the other
 * masters' majority is taken within that time. A newcomer whose process waited for the lock last
 * time lets the waiter a release woke go first (POLITE_WAIT_MS at most), so the processes that
 * contend take turns instead of the releasing one taking the lock again at once. Safety does not
 * depend on the order: only a quorum grants. Waiters sleep until a master announces a release, not
 * on a fixed poll; as every kind's waiters do, a process whose waiters heard nothing for a quiet
 * second (QUIET_RECHECK_MS) has one of them try again (a release woke a frozen process first in line).
 * @example
 * const redLock = new RedLock(fiveClients, 'pview');
 * await redLock.withLock(async () => incrementCounter(), { leaseTime: 5_000, waitTime: 10_000 });
 */
export class RedLock extends GroupLock<RedLockHandle> implements RedLockQuorum {
  readonly quorum: number;
  private readonly instanceTimeout?: number;
  private readonly driftFactor: number;
  /** See RedLockOptions.restartQuarantine (0: off). */
  private readonly restartQuarantine: number;
  /** Each master's part in this lock (its votes), in the order of `clients`. */
  private readonly masters: RedLockMaster[];
  /** Each client's closing signal (see ClosingWaits): a wait ends when any of them aborts. */
  private readonly closings: readonly AbortSignal[];
  /** Votes sent by waiting acquisitions whose answer has not come (see leaveWaiting). */
  private readonly waitingVotes = new Set<Promise<unknown>>();

  constructor(
    readonly clients: LockClient[],
    readonly name: string,
    options: RedLockOptions = {},
  ) {
    super();
    // A value that is not a LockClient has no engine: it would fail as a TypeError further on.
    if (!Array.isArray(clients) || clients.length === 0 || clients.some((client) => !isLockClient(client))) {
      throw new LockOptionsError('RedLock needs at least one LockClient, and LockClients only.', name, {
        option: 'clients',
        value: clients,
      });
    }
    // One server must not vote twice: the same LockClient, or two over one connection, is a mistake.
    if (new Set(clients.map((client) => client.redis)).size !== clients.length) {
      throw new LockOptionsError(
        'RedLock needs independent masters: a LockClient (or the Redis connection under one) is given more than once.',
        name,
        { option: 'clients', value: clients },
      );
    }
    assertLockName(name);
    checkDuration(name, 'instanceTimeout', options.instanceTimeout, TIMEOUT_RULE);
    this.restartQuarantine =
      checkDuration(name, 'restartQuarantine', options.restartQuarantine, RESTART_QUARANTINE_RULE) ?? 0;
    // A Cluster client's INFO answers from any of its nodes: no one master's start to read.
    if (this.restartQuarantine > 0 && clients.some((client) => client.redis.isCluster)) {
      throw new LockOptionsError(
        'restartQuarantine needs a standalone or Sentinel client for each master, not a Cluster client.',
        name,
        { option: 'restartQuarantine', value: options.restartQuarantine },
      );
    }
    const { driftFactor } = options;
    // typeof: a string or an array compares as a number ('0.5' >= 0) and would pass the range check.
    if (driftFactor !== undefined && !(typeof driftFactor === 'number' && driftFactor >= 0 && driftFactor < 1)) {
      throw new LockOptionsError(`driftFactor must be a number in [0, 1), got ${show(driftFactor)}.`, name, {
        option: 'driftFactor',
        value: driftFactor,
      });
    }
    this.quorum = Math.floor(clients.length / 2) + 1;
    this.masters = clients.map((client) => new RedLockMaster(engineOf(client), name));
    this.closings = clients.map((client) => engineOf(client).waits.signal);
    this.instanceTimeout = options.instanceTimeout;
    this.driftFactor = options.driftFactor ?? 0.01;
    if (this.restartQuarantine > 0) for (const client of clients) masterHealth(client.redis).watchStarts();
  }

  /** Never: each RedLock acquisition has an owner of its own (no re-entry). */
  heldInScope(): boolean {
    return false;
  }

  /** The first master's client's. */
  protected get logger(): LockLogger {
    return engineOf(this.clients[0]).logger;
  }

  /** @internal Emits a RedLock event (kind 'redlock') once, on the first master's client. */
  readonly emit: EmitLockEvent = (event, make) => engineOf(this.clients[0]).lockEvent(event, make);

  /** @internal Logs a lost RedLock and emits it as the first master's client's 'lockLost'. */
  reportLoss(error: LockLostError): void {
    this.logger.warn(error.message);
    this.clients[0].emit('lockLost', error);
  }

  /** @internal */
  leaseOf(leaseTime: number | undefined): number {
    // Whole ms, rounded up as every lock kind does: the masters' scripts take nothing else. Watched: the
    // longest watchdog timeout, since each master's client renews every third of its own; with the
    // shortest, a client of a longer one renewed too late and the lock was lost under a live holder.
    return leaseTime === undefined ? Math.max(...this.clients.map((c) => c.watchdogTimeout)) : Math.ceil(leaseTime);
  }

  /** @internal */
  drift(lease: number): number {
    return Math.round(lease * this.driftFactor) + 2;
  }

  /** @internal Whether master `index` is worth asking now. */
  usable(index: number): boolean {
    return masterHealth(this.clients[index].redis).usable;
  }

  /**
   * Waits for the reads of the masters' starts under way (a client just connected or reconnected), one
   * instance timeout at most: a master whose start is not known yet is kept out of the round.
   */
  private async startsRead(lease: number): Promise<void> {
    const reads = this.clients.flatMap((client, index) => {
      const read = this.usable(index) ? masterHealth(client.redis).startBeingRead() : undefined;
      return read ? [read] : [];
    });
    if (reads.length === 0) return;
    const timeoutMs = this.timeoutFor(lease);
    await bounded(Promise.all(reads), timeoutMs, { key: this.name, name: 'redlock master start' }).catch(
      () => undefined,
    );
  }

  /**
   * Whether master `index`, though it answers, may not vote now: it has not been up `restartQuarantine`
   * ms, or its start is not known yet (read at each connection, see MasterHealth.upFor).
   */
  private keptOut(index: number): boolean {
    if (this.restartQuarantine === 0) return false;
    const upFor = masterHealth(this.clients[index].redis).upFor();
    return upFor === undefined || upFor < this.restartQuarantine;
  }

  /** @internal An operation on master `index`, bounded; a master that does not answer is skipped from then on. */
  boundedOn<T>(index: number, operation: Promise<T>, what: string, timeoutMs: number): Promise<T> {
    return bounded(operation, timeoutMs, { key: this.name, name: what }).catch((error: unknown) => {
      if (error instanceof RedisUnavailableError) masterHealth(this.clients[index].redis).markDown();
      throw error;
    });
  }

  /** @internal See RedLockQuorum.followRelease: boundedOn's deadline, with no promise of its own. */
  followRelease(
    index: number,
    release: Promise<ReleaseOutcome>,
    timeoutMs: number,
    settled: (outcome?: ReleaseOutcome) => void,
  ): void {
    const deadline = boundedDeadline(timeoutMs, { key: this.name, name: 'redlock release' }, () => {
      masterHealth(this.clients[index].redis).markDown();
      settled(undefined);
    });
    const done = (outcome: ReleaseOutcome): void => {
      if (!deadline.expire) return;
      deadline.expire = undefined;
      settled(outcome);
    };
    release.then(done, () => done('expired'));
  }

  /**
   * The shortest lease a round can grant: one that outlasts a round taking the whole instance
   * timeout plus the drift allowance. Below it no round's validity would stay positive, so a wait
   * would retry in vain until it ends.
   * @internal
   */
  minimumLease(leaseTime: number): number {
    return this.drift(leaseTime) + this.timeoutFor(leaseTime) + 1;
  }

  /** Whether another process heard a release of this lock announced in the last CONTENDED_MS. */
  private othersWaiting(): boolean {
    const now = monotonicNow();
    return this.masters.some((master) => now - master.othersHeardAt < CONTENDED_MS);
  }

  /** @internal See RedLockQuorum.takeBack. */
  takeBack(index: number, token: string, lease: number): Promise<boolean> {
    return this.masters[index].takeBack(token, lease);
  }

  /**
   * @internal A lease of `lock()` or `extend()` (already checked as a duration): LockOptionsError when no
   * round could grant it with any validity (shorter than the instance timeout plus the drift).
   */
  checkLease(leaseTime: number | undefined): void {
    if (leaseTime === undefined) return;
    const lease = Math.ceil(leaseTime);
    if (lease < this.minimumLease(lease)) {
      throw new LockOptionsError(
        `RedLock leaseTime must be at least ${this.minimumLease(lease)} ms (the instance timeout plus the ` +
          `clock drift allowance), got ${String(leaseTime)}.`,
        this.name,
        { option: 'leaseTime', value: leaseTime },
      );
    }
  }

  /** LockQuorumError when too few masters answer by the end of the wait. */
  protected async acquire(options: AcquireOptions): Promise<RedLockHandle | null> {
    assertAcquireOptions(this.name, options);
    this.checkLease(options.leaseTime);
    const owner = options.owner ?? `redlock:${randomUUID()}`;
    const calledAt = monotonicNow();
    const deadline = options.waitTime === undefined ? Infinity : calledAt + options.waitTime;
    const { label } = options;
    const patience = this.timeoutFor(options.leaseTime);
    let watch: ReleaseWatch | undefined;
    // Whether the next round asks the gate first (see round).
    let gated = false;
    // A refused vote registers this process as waiting, unless the caller makes a single attempt.
    const waits = deadline > calledAt;
    // Whether a round of this wait lost (a refused vote registered its process on that master).
    let refusedBefore = false;
    let acquired = false;
    const registrations = new WaitRegistrations();
    // The caller's signal, or a client of this lock closing: the wait then ends with a LockError, as any
    // other kind's does (and takes nothing through a closed client).
    const signal = new RedLockWaitEnd(this.name, options.signal, this.closings);
    try {
      signal.throwIfAborted();
      if (this.othersWaiting() && deadline - calledAt > 0) {
        // Other processes heard this process's last release of the lock: they wait for it, and that
        // release (most likely this caller's own) just woke them. This newcomer lets them go first: it
        // pauses POLITE_WAIT_MS, then asks the gate like a woken waiter (refused there, it waits like one).
        this.emit('waiting', () => ({ name: this.name, kind: 'redlock', owner, label }));
        watch = await this.watchReleases(patience);
        await delay(Math.min(POLITE_WAIT_MS, Math.max(0, deadline - monotonicNow())), signal);
        gated = true;
      }
      for (let splits = 0; ;) {
        // Before every round, the first too: an aborted wait asks no master (see acquireLoop).
        signal.throwIfAborted();
        const seen = watch?.counts();
        const waiting = waits ? { refusedBefore, member: !!watch, registrations } : undefined;
        const round = await this.round(owner, options, gated, waiting);
        if (round instanceof RedLockHandle) {
          if (signal.aborted) {
            // The caller gave up while the round ran: it gets the reason, as from any other kind, and the
            // votes are given back (a watched grant nobody holds would otherwise be renewed for ever).
            await round.giveBack();
            signal.throwIfAborted();
          }
          acquired = true;
          this.emit('acquired', () => ({
            ...round.eventBase(),
            fencingTokens: round.fencingTokens,
            waitedMs: monotonicNow() - calledAt,
            reentered: false,
          }));
          return round;
        }
        refusedBefore = true;
        const remaining = deadline - monotonicNow();
        if (remaining <= 0) {
          // Out of time: say whether the masters refused (contention) or could not be reached.
          if (round.reachable < this.quorum) {
            const { reachable, keptOut, cause } = round;
            throw new LockQuorumError(this.name, reachable, this.quorum, this.clients.length, cause, keptOut);
          }
          this.emit('timedOut', () => ({
            name: this.name,
            kind: 'redlock',
            owner,
            label,
            waitedMs: monotonicNow() - calledAt,
          }));
          return null;
        }
        if (round.why === 'late') {
          gated = false;
          continue;
        }
        if (!watch) {
          this.emit('waiting', () => ({ name: this.name, kind: 'redlock', owner, label }));
          // Subscribed from now on; a release before that would be missed: try again at once.
          watch = await this.watchReleases(patience);
          gated = true;
          continue;
        }
        splits = round.why === 'split' ? splits + 1 : 0;
        if (splits > 0) {
          // Contenders divided the masters (a master coming back, a newcomer beside a woken waiter):
          // a random pause, growing with repeated splits, so that they do not meet again.
          await delay(Math.random() * Math.min(remaining, 250, 5 * 2 ** Math.min(splits, 6)), signal);
          gated = true;
        } else {
          // Until a master announces a release (or did during the round, or its channel was quiet for
          // a second, see watchReleases), or the holder's lease ends;
          // after a refusal by the gate alone, one instance timeout at most: a gate that refuses with
          // no release announced since may hold a stale key (a contender that crashed mid-round, a
          // give-back that did not arrive), and the next round asks every master at once, which
          // takes the lock from the others as classic RedLock does.
          // Refused by the gate: the gate's next release is the one to wait for (the other masters'
          // messages of the release that woke this waiter come later). Counted from before the vote was
          // sent, not from its reply: the message of a release that ran after the refusal may be read
          // before the reply (two sockets), and taken for an older one it slept the instance timeout.
          // A message of a release that ran before the vote costs one more round at most.
          const wait = round.gate !== undefined ? Math.min(round.retryAfter, patience) : round.retryAfter;
          const from = round.gate === undefined ? undefined : [round.gate];
          const timeout = Math.min(remaining, Math.max(1, wait));
          const announced = await watch.next(seen!, from, timeout, signal);
          gated = announced || round.gate === undefined;
        }
        signal.throwIfAborted();
      }
    } finally {
      watch?.close();
      // Granted, the process stays registered where the winning round (or an earlier one) was refused:
      // a release there would wake it for nothing, and it would pass the wake-up on, one hop late.
      if (acquired) registrations.whenAnswered((masters) => this.leaveWaiting(masters));
      else if (watch) this.leaveWaiting();
      else registrations.whenAnswered(() => this.leaveWaiting());
    }
  }

  /**
   * A wait that ended (without the lock, or granted while refused on `only` masters): on each master
   * (of `only`) where no other waiter of this process is left, the process leaves the waiting registry,
   * and a wake-up meant for it goes to the next process (in the background: the caller is not kept
   * waiting for it).
   */
  private leaveWaiting(only?: ReadonlySet<number>): void {
    // After the votes still on their way: a refusal that lands later registers the process again.
    void Promise.allSettled([...this.waitingVotes]).then(() => this.leaveRegistries(only));
  }

  private leaveRegistries(only?: ReadonlySet<number>): void {
    this.masters.forEach((master, index) => {
      if (only && !only.has(index)) return;
      if (!this.usable(index) || engineOf(this.clients[index]).waiters.memberCount(master.processChannel) > 0) return;
      const passed = master.passWakeUp();
      void this.boundedOn(index, passed, 'redlock leave', this.timeoutFor(undefined)).catch(() => undefined);
    });
  }

  /**
   * One round over the masters that are up, decided as early as possible: all at once, or `gated`:
   * the first one, then (if it did not refuse) the others at once.
   */
  private async round(
    owner: string,
    options: AcquireOptions,
    gated: boolean,
    waiting: RoundWaiting,
  ): Promise<RedLockHandle | LostRound> {
    const lease = this.leaseOf(options.leaseTime);
    if (this.restartQuarantine > 0) await this.startsRead(lease);
    const started = monotonicNow();
    const votes: Vote[] = [];
    const asked: number[] = [];
    this.clients.forEach((_, index) => {
      if (!this.usable(index)) votes.push({ index, failed: undefined, skipped: true });
      else if (this.keptOut(index)) {
        // Its start unreadable (INFO refused, say): that is why, and what the LockQuorumError carries.
        const problem = masterHealth(this.clients[index].redis).startProblem;
        votes.push({
          index,
          failed: problem && new Error(`master ${index + 1}: ${problem}`),
          skipped: true,
          keptOut: true,
        });
      } else asked.push(index);
    });
    // A token unique to this attempt on each master (see ask).
    const tokens = this.clients.map(() => `${randomUUID()}:${owner}`);
    // A granted vote the round does not keep is taken back, in the background.
    const undo = (vote: Vote): void => {
      if ('granted' in vote) this.masters[vote.index].undo(vote.granted.token, lease);
    };
    // Votes that come after the round is decided: kept until the round knows what to do with them.
    const lateVotes: Vote[] = [];
    let late = (vote: Vote): void => void lateVotes.push(vote);
    const onLate = (vote: Vote): void => late(vote);
    const settle = (handler: (vote: Vote) => void): void => {
      late = handler;
      lateVotes.splice(0).forEach(handler);
    };
    if (asked.length >= this.quorum && !gated) {
      votes.push(...(await this.decide(asked, this.quorum, tokens, lease, waiting, onLate)));
    } else if (asked.length >= this.quorum) {
      const gate = await new Promise<Vote>((resolve) => {
        const sent = this.ask(asked[0], tokens[asked[0]], lease, waiting);
        this.follow(asked[0], sent, tokens[asked[0]], lease, waiting, resolve, onLate);
      });
      votes.push(gate);
      if ('refusedFor' in gate) {
        settle(undo);
        return this.lost(votes, lease, asked[0]);
      }
      const need = this.quorum - ('granted' in gate ? 1 : 0);
      votes.push(...(await this.decide(asked.slice(1), need, tokens, lease, waiting, onLate)));
    }
    const granted = votes.filter((v) => 'granted' in v);
    const validity = lease - (monotonicNow() - started) - this.drift(lease);
    if (granted.length >= this.quorum && validity > 0) {
      const watched = options.leaseTime === undefined;
      const keep = (vote: { index: number; granted: GrantedVote }): LockHandle =>
        this.masters[vote.index].record(vote.granted.token, vote.granted.fencingToken, lease, watched, started);
      const handles: (LockHandle | null)[] = this.clients.map(() => null);
      for (const v of granted) if ('granted' in v) handles[v.index] = keep(v);
      // Every master was asked (or is in `votes` as skipped): the ones without a vote yet have not answered.
      const unanswered: (string | null)[] = tokens.slice();
      for (const v of votes) unanswered[v.index] = null;
      const handle = new RedLockHandle(this, {
        handles,
        unanswered,
        sentAt: started,
        lease,
        watched,
        instanceTimeout: this.timeoutFor(options.leaseTime),
        owner,
        label: options.label,
      });
      settle((v) => {
        if (!('granted' in v)) return;
        // Recorded only when the handle can take it; else taken back, never kept: by the release's
        // take-back if that ran after it, else undone once the take-back said it released nothing.
        if (handle.canAdopt(v.index)) return void handle.adopt(v.index, keep(v), started);
        const takenBack = handle.takeBackOf(v.index, v.granted.token);
        if (!takenBack) undo(v);
        else void takenBack.then((released) => released || undo(v));
      });
      return handle;
    }
    settle(undo);
    granted.forEach(undo); // in the background: never waits on a master
    const lost = this.lost(votes, lease);
    // A quorum granted, but too late to leave any validity: not contention, so the next round asks
    // every master at once (a gated round, two answers in a row, would be later still).
    return granted.length >= this.quorum ? { ...lost, why: 'late' } : lost;
  }

  /**
   * Asks `indices` in parallel and resolves with the votes known once `need` of them granted or can
   * no longer; the votes that come later go to `late`.
   */
  private decide(
    indices: number[],
    need: number,
    tokens: string[],
    lease: number,
    waiting: RoundWaiting,
    late: (vote: Vote) => void,
  ): Promise<Vote[]> {
    return new Promise((resolve) => {
      const known: Vote[] = [];
      let granted = 0;
      let decided = false;
      const check = (): void => {
        if (granted >= need || granted + indices.length - known.length < need) {
          decided = true;
          resolve(known);
        }
      };
      const onVote = (vote: Vote): void => {
        if (decided) return late(vote);
        known.push(vote);
        if ('granted' in vote) granted++;
        check();
      };
      // Every master's command is written before any vote's bookkeeping: the last one is asked as early
      // as it can be, and the replies are read once this turn ends.
      const sent = indices.map((index) => this.ask(index, tokens[index], lease, waiting));
      indices.forEach((index, i) => this.follow(index, sent[i], tokens[index], lease, waiting, onVote, late));
      check();
    });
  }

  /**
   * Sends master `index`'s vote: the classic algorithm's `SET NX PX` with a token unique to each attempt
   * on each master (lua/redlock-grant-3.lua), so an attempt that answers after its round gave up can
   * never stack onto a later round's hold, and is taken back on its own (see follow). RedLock is
   * therefore not re-entrant. Refused while the caller waits (`waiting`), the vote registers this process
   * as waiting there, so that the master's next release wakes it (or the process that has waited longer).
   */
  private ask(index: number, token: string, lease: number, waiting: RoundWaiting): Promise<AttemptReply> {
    const master = this.masters[index];
    const members = engineOf(this.clients[index]).waiters.memberCount(master.processChannel);
    const sent = master.grant(token, lease, voteWaiting(members, waiting));
    if (waiting) {
      this.waitingVotes.add(sent);
      waiting.registrations.sent();
    }
    return sent;
  }

  /**
   * Follows vote `sent` (see ask) with one handler: `onVote` hears it once, or its failure after the
   * instance timeout; a grant that answers after that goes to `late`. A vote that fails may hide a grant
   * that landed (a reply lost with its connection): it is taken back.
   */
  private follow(
    index: number,
    sent: Promise<AttemptReply>,
    token: string,
    lease: number,
    waiting: RoundWaiting,
    onVote: (vote: Vote) => void,
    late: (vote: Vote) => void,
  ): void {
    const timeoutMs = this.timeoutFor(lease);
    const describe = { key: this.name, name: 'redlock acquire' };
    const failed = (error: unknown): void => {
      if (error instanceof RedisUnavailableError) masterHealth(this.clients[index].redis).markDown();
      onVote({ index, failed: error });
    };
    const deadline = boundedDeadline(timeoutMs, describe, failed);
    // With restartQuarantine: the connection the vote went on. ioredis sends a command again on its next
    // connection when the reply was lost, and that may be a server restarted since, whose start this
    // round never checked: its answer counts as none, and a grant there is taken back.
    const health = this.restartQuarantine > 0 ? masterHealth(this.clients[index].redis) : undefined;
    const connection = health?.connectionCount;
    sent.then(
      (reply) => {
        if (waiting) {
          this.waitingVotes.delete(sent);
          waiting.registrations.answered(index, reply[0] !== 'granted');
        }
        if (health && health.connectionCount !== connection) {
          this.masters[index].undo(token, lease);
          if (!deadline.expire) return;
          deadline.expire = undefined;
          return failed(new Error(`master ${index + 1} answered on a new connection: perhaps restarted`));
        }
        const granted = reply[0] === 'granted';
        if (!deadline.expire) {
          if (granted) late({ index, granted: { token, fencingToken: reply[1] } });
          return;
        }
        deadline.expire = undefined;
        onVote(
          granted
            ? { index, granted: { token, fencingToken: reply[1] } }
            : { index, refusedFor: reply[1] >= 0 ? reply[1] : undefined },
        );
      },
      (error: unknown) => {
        if (waiting) {
          this.waitingVotes.delete(sent);
          waiting.registrations.answered(index, undefined);
        }
        this.masters[index].undo(token, lease);
        if (!deadline.expire) return;
        deadline.expire = undefined;
        failed(boundedFailure(error, timeoutMs, describe));
      },
    );
  }

  private lost(votes: Vote[], lease: number, gate?: number): LostRound {
    const failed = votes.filter((v) => 'failed' in v);
    const reachable = this.clients.length - failed.length;
    const cause = failed.find((v) => 'failed' in v && v.failed !== undefined);
    const keptOut = failed.filter((v) => 'keptOut' in v && v.keptOut).length;
    if (reachable < this.quorum) {
      return {
        why: 'unreachable',
        gate,
        retryAfter: UNREACHABLE_RETRY_MS,
        reachable,
        keptOut,
        cause: cause && 'failed' in cause ? cause.failed : undefined,
      };
    }
    const ttls = votes.flatMap((v) => ('refusedFor' in v ? [v.refusedFor ?? UNKNOWN_TTL_RETRY_MS] : []));
    const why = votes.some((v) => 'granted' in v) ? 'split' : 'refused';
    return { why, gate, retryAfter: Math.min(lease, ...ttls), reachable, keptOut };
  }

  private timeoutFor(lease: number | undefined): number {
    return this.instanceTimeout ?? Math.max(50, Math.min(250, Math.floor(this.leaseOf(lease) / 20)));
  }

  /**
   * Joins this process's channel on every master (where a release wakes one waiting process, see
   * redlock-release-3.lua); waits (bounded) for the subscriptions of the masters that are up. A wake-up
   * that comes when no waiter of this process is left is passed on to the next process. A release wakes
   * the process first in line even when it is frozen (its subscription still counts), so a master's
   * channel quiet for quietRecheckMs wakes this process's longest-parked waiter there, which tries again.
   */
  private async watchReleases(timeoutMs: number): Promise<ReleaseWatch> {
    const seats = this.clients.map((client, i) => {
      const master = this.masters[i];
      const { waiters, quietRecheckMs } = engineOf(client);
      const onUnheard = () => void master.passWakeUp().catch(() => undefined);
      return waiters.join(master.processChannel, { onUnheard, quietRecheckMs });
    });
    const watch = new ReleaseWatch(seats.map((s) => s.ticket));
    // A master that cannot subscribe just does not wake us; the lease-bound retry still does.
    await Promise.allSettled(
      seats.flatMap((s, i) => (this.usable(i) ? [this.boundedOn(i, s.subscribed, 'subscribe', timeoutMs)] : [])),
    );
    return watch;
  }
}

/**
 * What ends a RedLock wait: the caller's `own` signal (with its reason), or the closing of any client of
 * the lock (a LockError: the lock is not acquired, and nothing is taken through a closed client), as for
 * every other kind. Read at each check, listened to only while the wait sleeps (see onAbort): no
 * AbortController or listener per acquisition.
 */
class RedLockWaitEnd implements CombinedSignal {
  readonly parts: readonly AbortSignal[];

  constructor(
    private readonly name: string,
    private readonly own: AbortSignal | undefined,
    private readonly closings: readonly AbortSignal[],
  ) {
    this.parts = own ? [own, ...closings] : closings;
  }

  get aborted(): boolean {
    return this.own?.aborted === true || this.closings.some((closing) => closing.aborted);
  }

  get reason(): unknown {
    if (this.own?.aborted) return this.own.reason;
    if (!this.closings.some((closing) => closing.aborted)) return undefined;
    return new LockError(`A lock client of RedLock "${this.name}" is closed: the lock is not acquired.`, this.name);
  }

  throwIfAborted(): void {
    if (this.aborted) throw this.reason;
  }
}
