import type { LockBase, LockHandle, MultiLockHandle, Semaphore } from '../../lib';
import { LockNotHeldError, MultiLock } from '../../lib';
import { currentScope } from '../../lib/internal';
import {
  ABORT_WITHIN_MS,
  EXCESS_WITHIN_MS,
  exclusionViolations,
  lockKey,
  readSnapshot,
  SEMAPHORE_PERMITS,
  type Snapshot,
  type Violation,
} from './invariants';
import {
  describeStep,
  type ClientIndex,
  type Fault,
  type LeasePick,
  type OwnerPick,
  type SingleKind,
  type Step,
} from './steps';
import { sleep, WATCHDOG_MS, type World } from './world';

/**
 * One run of the lock model: a sequence of steps on fresh lock names (one per kind), the handles the
 * clients hold, and what the model knows of each lock, checked against Redis after every step (see
 * invariants.ts). The model predicts no command's outcome (a lost reply makes many unknowable): it
 * learns each outcome from what the library reports, and judges that against Redis.
 */

/** Replies the proxy may lose, per command (Redis ran the command; the client never hears). */
const GRANT_REPLY = /^\*[2-4]\r\n\$\d+\r\n(?:granted|reentered)\r\n/;
const RELEASE_REPLY = /^\$\d+\r\n(?:released|decremented|kept)\r\n/;
const FORCE_REPLY = /^:1\r\n$/;

/** MODEL_VERBOSE=1 prints every step as it ends. */
const VERBOSE = process.env.MODEL_VERBOSE === '1';

/** How long `lock()` waits in a foreground step: a step never blocks for long. */
const LOCK_WAIT_MS = 150;

type HandleState = 'live' | 'released' | 'release-pending' | 'lost' | 'consumed';

/** A handle the model tracks, with what it knows of it. */
export interface Tracked {
  /** h<seq> in the printed sequence. */
  seq: number;
  client: ClientIndex;
  kind: SingleKind;
  name: string;
  owner: OwnerPick;
  handle: LockHandle;
  /** The id Redis records the hold under (`handle.owner`). */
  id: string;
  leaseMs: number;
  explicitLease: boolean;
  /** When the acquiring call began (local ms; the lease cannot have started earlier). */
  calledAt: number;
  /** The MultiLock handle it is a member of. */
  group?: MultiLockHandle;
  state: HandleState;
  /** When the model first saw its hold gone (with an excuse) while it was still live. */
  absentSince?: number;
  /**
   * Set once Redis may rightly have dropped its hold while the handle lives on (a forceUnlock of its
   * lock, or an unlock({ owner }) of its owner elsewhere, that may have come after its grant): it
   * believes on borrowed time, and must abort once the hold is gone.
   */
  borrowed?: string;
}

/** What the model knows of one lock (one side of a read-write lock). */
interface LockState {
  kind: SingleKind;
  name: string;
  /** Per hold id: when Redis last showed it and when its lease was to end then (server ms). */
  lastSeen: Map<string, { at: number; expiresAt: number }>;
  /** When each forceUnlock of this lock returned (or failed). */
  forces: number[];
  /** Holds released by `unlock({ owner })` from a client that held none of them itself, per id. */
  remoteUnlocks: Map<string, number>;
  /**
   * Holds an `unlock({ owner })` from another client may have released: the call failed (its reply was
   * lost, Redis was unreachable), so it may or may not have landed, per id.
   */
  uncertainUnlocks: Set<string>;
  /** When each such unlock returned, and for which owner. */
  ownerUnlocks: { at: number; owner: OwnerPick }[];
  /** Per hold id: since when Redis has counted more holds than live handles believe. */
  excessSince: Map<string, number>;
  /** Acquisitions under way (background waiters), per client. */
  inflight: number[];
}

/** What an acquisition asked for. */
type AskedFor = { kind: SingleKind; owner: OwnerPick; lease: LeasePick };

type Outcome<T> = { value: T } | { error: Error };

async function settle<T>(promise: Promise<T>): Promise<Outcome<T>> {
  try {
    return { value: await promise };
  } catch (error) {
    return { error: error as Error };
  }
}

function describeError(error: Error): string {
  return `${error.name}: ${error.message.split('\n')[0].slice(0, 140)}`;
}

/** Counters for the summary: what ran, what failed, what the library reported. */
export class ModelStats {
  readonly counts = new Map<string, number>();
  add(what: string, n = 1): void {
    this.counts.set(what, (this.counts.get(what) ?? 0) + n);
  }
  toString(): string {
    return [...this.counts]
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([k, v]) => `  ${k}: ${v}`)
      .join('\n');
  }
}

export class ModelViolation extends Error {
  /** How many steps of the run were executed when it broke (the rest of the sequence never ran). */
  readonly executed: number;

  constructor(
    readonly violations: Violation[],
    readonly trace: string[],
  ) {
    super(
      `${violations.map((v) => `[${v.invariant}] ${v.lock}: ${v.detail}`).join('\n')}\n` +
        `sequence up to the failure:\n${trace.map((line) => `  ${line}`).join('\n')}`,
    );
    this.name = 'ModelViolation';
    this.executed = trace.filter((line) => /^\d+\./.test(line)).length;
  }
}

export class ModelRun {
  readonly trace: string[] = [];
  readonly tracked: Tracked[] = [];
  private readonly locks = new Map<string, LockState>();
  private readonly pending = new Set<Promise<void>>();
  private readonly absorbed: (() => void)[] = [];
  private readonly names: Record<SingleKind, string>;
  private seq = 0;
  private steps = 0;

  constructor(
    private readonly world: World,
    readonly run: number,
    private readonly stats: ModelStats,
  ) {
    const rw = `run${run}:rw`;
    this.names = {
      reentrant: `run${run}:reentrant`,
      fair: `run${run}:fair`,
      simple: `run${run}:simple`,
      read: rw,
      write: rw,
      semaphore: `run${run}:semaphore`,
    };
    for (const kind of Object.keys(this.names) as SingleKind[]) {
      this.locks.set(lockKey(kind, this.names[kind]), {
        kind,
        name: this.names[kind],
        lastSeen: new Map(),
        forces: [],
        remoteUnlocks: new Map(),
        uncertainUnlocks: new Set(),
        ownerUnlocks: [],
        excessSince: new Map(),
        inflight: [0, 0, 0],
      });
    }
  }

  private lockState(kind: SingleKind): LockState {
    return this.locks.get(lockKey(kind, this.names[kind]))!;
  }

  // ---------------------------------------------------------------------------------------------
  // Steps

  async execute(step: Step): Promise<void> {
    this.absorbSettled();
    const line = `${++this.steps}. ${describeStep(step)}`;
    this.stats.add(`step ${step.op}`);
    const result = await this.perform(step);
    this.trace.push(`${line} -> ${result}`);
    if (VERBOSE) process.stdout.write(`run ${this.run} ${line} -> ${result}\n`);
    this.absorbSettled();
  }

  private async perform(step: Step): Promise<string> {
    switch (step.op) {
      case 'acquire': {
        const { client, kind, owner, how, lease, permits, fault } = step;
        const pick = { kind, owner, lease };
        return this.acquireStep(client, fault, pick, () => this.acquire(client, kind, owner, how, lease, permits));
      }
      case 'wait':
        return this.startWaiter(step.client, step.kind, step.owner, step.lease, step.waitMs);
      case 'reenter': {
        const live = this.live();
        if (live.length === 0) return 'no live handle';
        const h = live[step.pick % live.length];
        const client = isExplicit(h.owner) ? step.client : h.client;
        const permits = h.kind === 'semaphore' ? Number(h.id.split(':', 1)[0]) : 1;
        const pick = { kind: h.kind, owner: h.owner, lease: step.lease };
        const result = await this.acquireStep(client, step.fault, pick, () =>
          this.acquire(client, h.kind, h.owner, step.how, step.lease, permits),
        );
        return `h${h.seq} (${h.kind} owner=${h.owner} in c${h.client}) again in c${client}: ${result}`;
      }
      case 'release':
        return this.releaseStep(step.pick, step.fault);
      case 'unlock':
        return this.unlockStep(step);
      case 'forceUnlock': {
        const { client, kind, fault } = step;
        const lock = this.lockOf(client, kind, 'default') as LockBase;
        const outcome = await this.withFault(client, fault, FORCE_REPLY, () => lock.forceUnlock());
        this.lockState(kind).forces.push(Date.now());
        // Whatever the outcome (a lost reply hides it), every hold of this lock may be gone now.
        for (const t of this.live()) if (t.kind === kind) t.borrowed ??= 'a forceUnlock';
        if ('error' in outcome.result) return `${describeError(outcome.result.error)}${outcome.note}`;
        return `${outcome.result.value}${outcome.note}`;
      }
      case 'multi':
        return this.multiStep(step);
      case 'idle':
        await sleep(step.ms);
        return 'ok';
      case 'fault': {
        const outcome = await this.withFault(step.client, step.fault, undefined, () => sleep(20));
        return `done${outcome.note}`;
      }
    }
  }

  /** Runs `command` with `fault` around it; `note` says what the fault did. */
  private async withFault<T>(
    client: ClientIndex,
    fault: Fault,
    dropPattern: RegExp | undefined,
    command: () => Promise<T>,
  ): Promise<{ result: Outcome<T>; note: string }> {
    if (fault.kind !== 'none')
      this.stats.add(`fault ${fault.kind}${fault.kind === 'kill' ? ` ${fault.connection}` : ''}`);
    switch (fault.kind) {
      case 'none':
        return { result: await settle(command()), note: '' };
      case 'lost-reply': {
        if (!dropPattern) return { result: await settle(command()), note: '' };
        this.world.proxy.dropNextReply(dropPattern);
        const result = await settle(command());
        const fired = !this.world.proxy.cancelDrop();
        if (fired) this.stats.add('fault lost-reply (a reply was lost)');
        return { result, note: fired ? ' (its reply was lost)' : ' (no reply to lose)' };
      }
      case 'kill': {
        const running = settle(command());
        if (fault.afterMs > 0) await sleep(fault.afterMs);
        const killed = await this.world.kill(client, fault.connection);
        return { result: await running, note: ` (${killed} connection(s) killed)` };
      }
      case 'sigstop':
        return { result: await this.world.frozenFor(fault.ms, () => settle(command())), note: '' };
    }
  }

  private lockOf(client: ClientIndex, kind: SingleKind, lease: LeasePick): LockBase | Semaphore {
    const locks = this.world.clients[client].locks;
    const name = this.names[kind];
    switch (kind) {
      case 'reentrant':
        return locks.getLock(name);
      case 'fair':
        return locks.getFairLock(name);
      case 'simple':
        return lease === 'watchdog' ? locks.getSimpleLock(name, { leaseTime: 'watchdog' }) : locks.getSimpleLock(name);
      case 'read':
        return locks.getReadWriteLock(name).readLock();
      case 'write':
        return locks.getReadWriteLock(name).writeLock();
      case 'semaphore':
        return locks.getSemaphore(name, { permits: SEMAPHORE_PERMITS });
    }
  }

  /** One acquisition as the step asks: in the client's scope, with an explicit owner, or with none. */
  private acquire(
    client: ClientIndex,
    kind: SingleKind,
    owner: OwnerPick,
    how: 'tryLock' | 'lock',
    lease: LeasePick,
    permits: number,
    waitTime = how === 'lock' ? LOCK_WAIT_MS : 0,
  ): Promise<LockHandle | null> {
    const lock = this.lockOf(client, kind, lease);
    const leaseTime = typeof lease === 'number' ? lease : undefined;
    const call = (): Promise<LockHandle | null> => {
      if (kind === 'semaphore') {
        const semaphore = lock as Semaphore;
        return how === 'tryLock'
          ? semaphore.tryAcquire({ permits, leaseTime, waitTime })
          : semaphore.acquire({ permits, leaseTime, waitTime });
      }
      const options = { leaseTime, waitTime, owner: isExplicit(owner) ? owner : undefined };
      const base = lock as LockBase;
      return how === 'tryLock' ? base.tryLock(options) : base.lock(options);
    };
    return owner === 'scope' ? this.world.clients[client].inScope(call) : call();
  }

  private async acquireStep(
    client: ClientIndex,
    fault: Fault,
    pick: AskedFor,
    acquire: () => Promise<LockHandle | null>,
  ): Promise<string> {
    const calledAt = Date.now();
    const { result, note } = await this.withFault(client, fault, GRANT_REPLY, acquire);
    return this.learnAcquisition(result, calledAt, client, pick) + note;
  }

  /** What an acquisition's outcome teaches: a handle to track, or nothing held. */
  private learnAcquisition(
    result: Outcome<LockHandle | null>,
    calledAt: number,
    client: ClientIndex,
    pick: AskedFor,
  ): string {
    if ('error' in result) {
      const { error } = result;
      this.stats.add(`outcome ${error.name}`);
      return error.name === 'LockAcquireTimeoutError' ? 'timed out' : describeError(error);
    }
    if (result.value === null) {
      this.stats.add('outcome refused');
      return 'refused';
    }
    const t = this.track(result.value, client, calledAt, pick);
    return `h${t.seq} id=${JSON.stringify(t.id)} holdCount=${t.handle.holdCount} token=${t.handle.fencingToken}`;
  }

  /** Tracks a new handle, acquired as `known` asked. */
  private track(
    handle: LockHandle,
    client: ClientIndex,
    calledAt: number,
    known: AskedFor,
    group?: MultiLockHandle,
  ): Tracked {
    const explicitLease = typeof known.lease === 'number' || (known.kind === 'simple' && known.lease === 'default');
    const leaseMs = typeof known.lease === 'number' ? known.lease : explicitLease ? 3_000 : WATCHDOG_MS;
    const t: Tracked = {
      seq: ++this.seq,
      client,
      kind: known.kind,
      name: this.names[known.kind],
      owner: known.owner,
      handle,
      id: handle.owner,
      leaseMs,
      explicitLease,
      calledAt,
      group,
      state: 'live',
    };
    this.tracked.push(t);
    this.stats.add(`outcome acquired ${t.kind}`);
    // A waiter granted before a forceUnlock (or an unlock of its owner) that came while it waited may
    // have lost its hold to it.
    const state = this.lockState(t.kind);
    if (state.forces.some((at) => at >= calledAt)) t.borrowed = 'a forceUnlock while it waited';
    else if (state.ownerUnlocks.some((u) => u.at >= calledAt && u.owner === t.owner)) {
      t.borrowed = 'an unlock({ owner }) while it waited';
      // That unlock, from this client, found the grant recorded before its lock() returned, and released it.
      if (handle.holdCount === 0) t.state = 'consumed';
    }
    // The lease this grant set ends no sooner than this; a re-entry or a lent hold may have set it
    // shorter than what Redis showed before.
    const seen = state.lastSeen.get(t.id);
    const ends = calledAt + leaseMs;
    state.lastSeen.set(t.id, {
      at: seen?.at ?? calledAt,
      expiresAt: seen && seen.expiresAt > calledAt ? Math.min(seen.expiresAt, ends) : ends,
    });
    return t;
  }

  private startWaiter(client: ClientIndex, kind: SingleKind, owner: OwnerPick, lease: LeasePick, waitMs: number) {
    const state = this.lockState(kind);
    state.inflight[client]++;
    const calledAt = Date.now();
    const seq = this.trace.length + 1;
    const pick = { kind, owner, lease };
    const permits = 1;
    const done = settle(this.acquire(client, kind, owner, 'lock', lease, permits, waitMs)).then((result) => {
      this.absorbed.push(() => {
        state.inflight[client]--;
        this.trace.push(`   (the waiter of step ${seq}: ${this.learnAcquisition(result, calledAt, client, pick)})`);
      });
      this.pending.delete(done);
    });
    this.pending.add(done);
    return 'started';
  }

  /** Background waiters that ended since the last step are taken into the model, in the order they ended. */
  private absorbSettled(): void {
    for (const absorb of this.absorbed.splice(0)) absorb();
  }

  private live(): Tracked[] {
    return this.tracked.filter((t) => t.state === 'live' && !t.handle.signal.aborted);
  }

  private async releaseStep(pick: number, fault: Fault): Promise<string> {
    const candidates = this.tracked.filter((t) => t.state === 'live' || t.state === 'lost');
    if (candidates.length === 0) return 'no handle to release';
    const h = candidates[pick % candidates.length];
    const members = h.group ? this.tracked.filter((t) => t.group === h.group) : [h];
    const release = h.group ? () => h.group!.release() : () => h.handle.release();
    const { result, note } = await this.withFault(h.client, fault, RELEASE_REPLY, release);
    const outcomes: string[] = [];
    for (const member of members) {
      // A handle's release is made once and remembered: asking again gives its outcome.
      const outcome = member === h && !h.group ? result : await settle(member.handle.release());
      outcomes.push(`h${member.seq}: ${this.learnRelease(member, outcome)}`);
    }
    const group = h.group ? `MultiLock ${'error' in result ? describeError(result.error) : result.value}; ` : '';
    return `${group}${outcomes.join(', ')}${note}`;
  }

  private learnRelease(t: Tracked, outcome: Outcome<string>): string {
    if ('error' in outcome) {
      this.stats.add(`release error ${outcome.error.name}`);
      return describeError(outcome.error); // the library keeps the hold as ours: the handle stays as it was
    }
    this.stats.add(`release ${outcome.value}`);
    t.state = outcome.value === 'pending' ? 'release-pending' : 'released';
    return outcome.value;
  }

  private async unlockStep(step: Extract<Step, { op: 'unlock' }>): Promise<string> {
    const { client, kind, owner, fault } = step;
    const lock = this.lockOf(client, kind, 'default') as LockBase;
    const mine = this.live().filter((t) => t.client === client && t.kind === kind);
    const before = new Map(mine.map((t) => [t, t.handle.holdCount]));
    const call = (): Promise<string> =>
      owner === 'scope'
        ? this.world.clients[client].inScope(() => lock.unlock())
        : isExplicit(owner)
          ? lock.unlock({ owner })
          : lock.unlock();
    const { result, note } = await this.withFault(client, fault, RELEASE_REPLY, call);
    if ('error' in result) {
      this.stats.add(`unlock error ${result.error.name}`);
      if (result.error instanceof LockNotHeldError) return `LockNotHeldError${note}`;
      // Its outcome is unknown: it may have released a hold of the owner, here or elsewhere.
      const state = this.lockState(kind);
      for (const id of this.idsOfOwner(client, kind, owner)) state.uncertainUnlocks.add(id);
      return `${describeError(result.error)}${note}`;
    }
    this.stats.add(`unlock ${result.value}`);
    // A wait of this client granted while the call ran may have had its hold released by it: the
    // library had recorded the grant (so the call found it), its lock() had not returned yet.
    const grantedMeanwhile = this.live().filter(
      (t) => t.client === client && t.kind === kind && !before.has(t) && t.handle.holdCount === 0,
    );
    const changed = [...before]
      .filter(([t, count]) => t.handle.holdCount < count)
      .map(([t]) => t)
      .concat(grantedMeanwhile);
    if (changed.length > 0) {
      // It released a hold this client records: the model consumes one handle of it.
      const t = changed.reduce((a, b) => (a.seq > b.seq ? a : b));
      t.state = result.value === 'pending' ? 'release-pending' : 'consumed';
      if (t.owner !== owner) {
        this.wrongUnlock = {
          invariant: 'unlock-owner',
          lock: lockKey(kind, this.names[kind]),
          detail: `unlock({ owner: ${owner} }) in c${client} released h${t.seq}, a hold of owner ${t.owner}`,
        };
      }
      return `${result.value}: consumed h${t.seq}${note}`;
    }
    if (result.value === 'released' || result.value === 'decremented') {
      // Released in Redis for an owner whose holds this client does not record (held elsewhere): the
      // holds of that owner's handles in other clients (a simple lock's token names its owner), or,
      // if the model knows none, a hold recorded under the owner id itself.
      const ids = this.idsOfOwner(client, kind, owner);
      const state = this.lockState(kind);
      for (const id of ids) state.remoteUnlocks.set(id, (state.remoteUnlocks.get(id) ?? 0) + 1);
      state.ownerUnlocks.push({ at: Date.now(), owner });
    }
    return `${result.value} (no hold of c${client})${note}`;
  }

  /**
   * The hold ids an unlock by `owner` from `client` may release: the holds of that owner's handles in
   * any client (a simple lock's token names its owner), or, if the model knows none, a hold recorded
   * under the owner id itself.
   */
  private idsOfOwner(client: ClientIndex, kind: SingleKind, owner: OwnerPick): Set<string> {
    const ids = new Set(
      this.live()
        .filter((t) => t.kind === kind && isExplicit(owner) && t.owner === owner)
        .map((t) => t.id),
    );
    if (ids.size === 0) {
      const { locks, inScope } = this.world.clients[client];
      ids.add(owner === 'scope' ? `${locks.clientId}:${inScope(() => currentScope()?.id)}` : owner);
    }
    return ids;
  }

  /** A wrong hold released by unlock({ owner }), reported by the next check. */
  private wrongUnlock?: Violation;

  private async multiStep(step: Extract<Step, { op: 'multi' }>): Promise<string> {
    const { clients, kinds, owner, how, lease, fault } = step;
    const members = kinds.map((kind, i) => this.lockOf(clients[i], kind, lease) as LockBase);
    let multi: MultiLock;
    try {
      multi = new MultiLock(members); // refuses some pairs at once (a read and a write side of one name)
    } catch (error) {
      this.stats.add(`outcome multi ${(error as Error).name}`);
      return describeError(error as Error);
    }
    const leaseTime = typeof lease === 'number' ? lease : undefined;
    const options = {
      leaseTime,
      waitTime: how === 'lock' ? LOCK_WAIT_MS : 0,
      owner: isExplicit(owner) ? owner : undefined,
    };
    const call = () => (how === 'tryLock' ? multi.tryLock(options) : multi.lock(options));
    const calledAt = Date.now();
    const { result, note } = await this.withFault(clients[0], fault, GRANT_REPLY, () =>
      owner === 'scope' ? this.world.clients[clients[0]].inScope(call) : call(),
    );
    if ('error' in result) {
      this.stats.add(`outcome multi ${result.error.name}`);
      return `${result.error.name === 'LockAcquireTimeoutError' ? 'timed out' : describeError(result.error)}${note}`;
    }
    if (!result.value) {
      this.stats.add('outcome multi refused');
      return `refused${note}`;
    }
    const group = result.value;
    const held = group.handles.map((handle, i) => {
      if (!handle) return 'none';
      const t = this.track(handle, clients[i], calledAt, { kind: kinds[i], owner, lease }, group);
      return `h${t.seq} id=${JSON.stringify(t.id)} holdCount=${handle.holdCount}`;
    });
    this.stats.add('outcome multi acquired');
    return `${held.join(', ')}${note}`;
  }

  // ---------------------------------------------------------------------------------------------
  // End of a run

  /** Waits for the background waiters, then releases every handle still held (best effort). */
  async finish(): Promise<void> {
    await Promise.all([...this.pending]);
    this.absorbSettled();
    for (const t of this.tracked) {
      if (t.state !== 'live' && t.state !== 'lost') continue;
      const outcome = await settle(t.group ? t.group.release().then(() => t.handle.release()) : t.handle.release());
      this.learnRelease(t, outcome);
    }
  }

  /** Whether Redis may still hold something of this run (its locks are then checked until it does not). */
  isDrained(snapshot: Snapshot): boolean {
    if (this.pending.size > 0 || this.live().length > 0) return false;
    return [...this.locks.values()].every((s) => snapshot.locks.get(lockKey(s.kind, s.name))!.holds.size === 0);
  }

  // ---------------------------------------------------------------------------------------------
  // Invariants

  snapshotTargets(): { kind: SingleKind; name: string }[] {
    return [...this.locks.values()].map(({ kind, name }) => ({ kind, name }));
  }

  /** Reads Redis and checks every invariant (see invariants.ts); throws ModelViolation. */
  async check(): Promise<void> {
    const violations = this.evaluate(await this.snapshot());
    if (violations.length > 0) throw new ModelViolation(violations, this.trace);
  }

  async snapshot(): Promise<Snapshot> {
    return readSnapshot(this.world.admin, this.world.keyPrefix, this.snapshotTargets());
  }

  /** The invariants on one snapshot of Redis; updates what the model has seen. */
  evaluate(snapshot: Snapshot): Violation[] {
    const { serverNow } = snapshot;
    const violations: Violation[] = [];
    if (this.wrongUnlock) violations.push(this.wrongUnlock);
    this.wrongUnlock = undefined;
    // Handles whose signal aborted by now believe nothing: the lost ones (counted by reason).
    for (const t of this.tracked) {
      if (t.state === 'live' && t.handle.signal.aborted) {
        t.state = 'lost';
        const reason = (t.handle.signal.reason as { reason?: string } | undefined)?.reason ?? 'unknown';
        this.stats.add(`lost ${t.kind} (${reason})`);
      }
    }
    const live = this.live();
    for (const state of this.locks.values()) {
      const key = lockKey(state.kind, state.name);
      const snap = snapshot.locks.get(key)!;
      const writeSide = state.kind === 'read' ? snapshot.locks.get(lockKey('write', state.name)) : undefined;
      violations.push(...exclusionViolations(state.kind, state.name, snap, writeSide));
      const here = live.filter((t) => t.kind === state.kind);
      const inflight = state.inflight.some((n) => n > 0);

      // Handles that believe on borrowed time: a forceUnlock came after their grant, or their explicit
      // lease is over. They are not counted as believers, and must abort once their hold is gone.
      const now = Date.now();
      const leaseEnd = (t: Tracked) =>
        Math.max(...here.filter((o) => o.client === t.client && o.id === t.id).map((o) => o.calledAt + o.leaseMs));
      const borrowed = (t: Tracked): string | undefined =>
        t.borrowed !== undefined
          ? t.borrowed
          : t.explicitLease && now >= leaseEnd(t) - 50
            ? 'its lease ended'
            : undefined;

      // What the clients believe, per hold id: the sum over clients of each one's holdCount.
      const believed = new Map<string, number>();
      for (const client of [0, 1, 2] as ClientIndex[]) {
        const byId = new Map<string, Tracked[]>();
        for (const t of here.filter((h) => h.client === client)) byId.set(t.id, [...(byId.get(t.id) ?? []), t]);
        for (const [id, handles] of byId) {
          const libraryCount = Math.max(...handles.map((t) => t.handle.holdCount));
          const onBorrowedTime = handles.filter((t) => borrowed(t) !== undefined).length;
          believed.set(id, (believed.get(id) ?? 0) + Math.max(0, libraryCount - onBorrowedTime));
          if (libraryCount !== handles.length && state.inflight[client] === 0) {
            violations.push({
              invariant: 'belief-library',
              lock: key,
              detail:
                `c${client} counts ${libraryCount} hold(s) of ${JSON.stringify(id)}, but holds ` +
                `${handles.length} live handle(s): ${handles.map((t) => `h${t.seq}`).join(', ')}`,
            });
          }
        }
      }

      // A handle believing on borrowed time whose hold is gone must abort in time.
      const staleCheck = (t: Tracked, why: string) => {
        t.absentSince ??= now;
        const deadline = Math.max(t.absentSince + ABORT_WITHIN_MS, t.explicitLease ? leaseEnd(t) + 1_500 : 0);
        if (now <= deadline) return;
        violations.push({
          invariant: 'stale-believer',
          lock: key,
          detail:
            `h${t.seq} (c${t.client} owner=${t.owner}, id ${JSON.stringify(t.id)}) still believes it holds the lock ` +
            `${now - t.absentSince} ms after its hold left Redis (${why}), its signal not aborted`,
        });
      };
      for (const t of here) {
        const why = borrowed(t);
        if (why === undefined) continue;
        if ((snap.holds.get(t.id) ?? 0) > 0) t.absentSince = undefined;
        else staleCheck(t, why);
      }

      // Belief (at least): every believed hold is in Redis, unless Redis may rightly have dropped it.
      for (const [id, count] of believed) {
        if (count === 0) continue;
        const inRedis = snap.holds.get(id) ?? 0;
        const expected = count - (state.remoteUnlocks.get(id) ?? 0);
        const handles = here.filter((t) => t.id === id && borrowed(t) === undefined);
        if (inRedis > 0 && inRedis >= expected) {
          for (const t of handles) t.absentSince = undefined;
          continue;
        }
        const excuse = this.excuse(state, id, serverNow, inflight);
        const who = handles.map((t) => `h${t.seq}(c${t.client} owner=${t.owner})`).join(', ');
        if (!excuse) {
          violations.push({
            invariant: 'belief',
            lock: key,
            detail:
              `${who} believe ${count} hold(s) of ${JSON.stringify(id)} (expected in Redis: ${expected}), ` +
              `Redis has ${inRedis}, with no forceUnlock, lease end or unlock elsewhere to explain it ` +
              `(last seen with ${this.leaseLeft(state, id, serverNow)} ms of lease left); Redis: ${show(snap)}`,
          });
          continue;
        }
        if (inRedis > 0) continue; // fewer, rightly: the rest believe a hold that is there
        for (const t of handles) staleCheck(t, excuse);
      }

      // Belief (exact) and no orphan: what Redis holds beyond the believers goes within EXCESS_WITHIN_MS.
      for (const [id, count] of snap.holds) {
        const held = Math.max(count, 1); // a fair hand-off not yet accepted counts too
        const expected = Math.max(0, (believed.get(id) ?? 0) - (state.remoteUnlocks.get(id) ?? 0));
        if (held <= expected) {
          state.excessSince.delete(id);
          continue;
        }
        const since = state.excessSince.get(id) ?? now;
        state.excessSince.set(id, since);
        if (now - since > EXCESS_WITHIN_MS) {
          state.excessSince.delete(id);
          violations.push({
            invariant: expected === 0 ? 'orphan' : 'belief-exact',
            lock: key,
            detail:
              `Redis has held ${count} hold(s) of ${JSON.stringify(id)} for over ${now - since} ms while live handles ` +
              `believe ${expected} (lease left now: ${this.leaseLeftIn(snap, id, serverNow)} ms); Redis: ${show(snap)}`,
          });
        }
      }
      for (const id of state.excessSince.keys()) if (!snap.holds.has(id)) state.excessSince.delete(id);
      for (const id of state.uncertainUnlocks) {
        if (!inflight && !here.some((t) => t.id === id)) state.uncertainUnlocks.delete(id);
      }
      for (const id of state.remoteUnlocks.keys()) {
        if (!inflight && !here.some((t) => t.id === id)) state.remoteUnlocks.delete(id);
      }

      for (const [id, expiresAt] of snap.expiresAt) state.lastSeen.set(id, { at: serverNow, expiresAt });
    }
    return violations;
  }

  /** Why Redis may rightly have dropped hold `id`, or undefined. */
  private excuse(state: LockState, id: string, serverNow: number, inflight: boolean): string | undefined {
    const seen = state.lastSeen.get(id);
    if (inflight) return 'an acquisition of this lock is under way';
    if (!seen || seen.expiresAt <= serverNow + 25) return 'its lease ended';
    if ((state.remoteUnlocks.get(id) ?? 0) > 0) return 'an unlock({ owner }) from another client';
    if (state.uncertainUnlocks.has(id)) return 'an unlock({ owner }) whose outcome was lost';
    return undefined;
  }

  private leaseLeft(state: LockState, id: string, serverNow: number): number | string {
    const seen = state.lastSeen.get(id);
    return seen ? seen.expiresAt - serverNow : 'never seen';
  }

  private leaseLeftIn(snap: Snapshot['locks'] extends Map<string, infer L> ? L : never, id: string, now: number) {
    const expiresAt = snap.expiresAt.get(id);
    return expiresAt === undefined ? '?' : expiresAt === Infinity ? 'no expiry' : expiresAt - now;
  }
}

function isExplicit(owner: OwnerPick): boolean {
  return owner !== 'scope' && owner !== 'none';
}

function show(snap: { holds: Map<string, number> }): string {
  return JSON.stringify(Object.fromEntries(snap.holds));
}
