import fc from 'fast-check';

/**
 * The commands of the lock model as plain data, so that fast-check can generate, shrink and print
 * them, and a seed replays the same sequence. Which handle a command acts on is an index taken modulo
 * the handles alive at that moment: the command stays meaningful when shrinking removes others.
 */

/** The lock kinds a single acquisition may take (a MultiLock is a command of its own). */
export const SINGLE_KINDS = ['reentrant', 'fair', 'simple', 'read', 'write', 'semaphore'] as const;
export type SingleKind = (typeof SINGLE_KINDS)[number];

/** Kinds a MultiLock may hold (each member its own lock name). */
export const MEMBER_KINDS = ['reentrant', 'fair', 'simple', 'write', 'read'] as const;
export type MemberKind = (typeof MEMBER_KINDS)[number];

/** Kinds `unlock({ owner })` and `forceUnlock()` apply to (a semaphore has neither). */
export const OWNED_KINDS = ['reentrant', 'fair', 'simple', 'read', 'write'] as const;
export type OwnedKind = (typeof OWNED_KINDS)[number];

/**
 * Owners: explicit ids shared by every client (`a` is a prefix of `ab` and `a:b`; `:`, `{`, `}`
 * inside), the client's one long-lived lock scope, or none (a fresh owner per acquisition).
 */
export const EXPLICIT_OWNERS = ['a', 'ab', 'a:b', '{x}', 'x}:{y'] as const;
export type OwnerPick = (typeof EXPLICIT_OWNERS)[number] | 'scope' | 'none';
export const OWNER_PICKS: readonly OwnerPick[] = [...EXPLICIT_OWNERS, 'scope', 'none'];

/** 'default': the kind's own default (the watchdog, or a simple lock's 3 s); 'watchdog' also for a simple lock. */
export type LeasePick = 'default' | 'watchdog' | 1_500 | 3_000;

/** The three lock clients: 0 over the application's own ioredis client at its defaults, 1 and 2 from createLockClient. */
export type ClientIndex = 0 | 1 | 2;

/** What goes wrong around a command (see the FAULTS list of the spec). */
export type Fault =
  | { kind: 'none' }
  /** The proxy swallows the command's reply and drops that connection (Redis ran the command). */
  | { kind: 'lost-reply' }
  /** CLIENT KILL of the acting client's lock or pub/sub connection, `afterMs` into the command. */
  | { kind: 'kill'; connection: 'lock' | 'pubsub'; afterMs: number }
  /** SIGSTOP of Redis for `ms` while the command runs. */
  | { kind: 'sigstop'; ms: number };

export interface AcquireOptionsPick {
  how: 'tryLock' | 'lock';
  lease: LeasePick;
}

export type Step =
  | ({
      op: 'acquire';
      client: ClientIndex;
      kind: SingleKind;
      owner: OwnerPick;
      permits: 1 | 2;
      fault: Fault;
    } & AcquireOptionsPick)
  /** An acquisition left running while the next commands go on (a waiter), absorbed when it ends. */
  | { op: 'wait'; client: ClientIndex; kind: SingleKind; owner: OwnerPick; lease: LeasePick; waitMs: number }
  /** The owner of a live handle acquires its lock again, in `client` when the owner is explicit. */
  | ({ op: 'reenter'; pick: number; client: ClientIndex; fault: Fault } & AcquireOptionsPick)
  | { op: 'release'; pick: number; fault: Fault }
  | { op: 'unlock'; client: ClientIndex; kind: OwnedKind; owner: OwnerPick; fault: Fault }
  | { op: 'forceUnlock'; client: ClientIndex; kind: OwnedKind; fault: Fault }
  | ({
      op: 'multi';
      clients: [ClientIndex, ClientIndex];
      kinds: [MemberKind, MemberKind];
      owner: OwnerPick;
      fault: Fault;
    } & AcquireOptionsPick)
  /** Time passes: leases run, the watchdog renews, waiters wake. */
  | { op: 'idle'; ms: number }
  /** A fault on its own, between commands. */
  | { op: 'fault'; client: ClientIndex; fault: Fault };

/** A kind the model exercises: one of the single kinds, or a MultiLock over two of them. */
export type KindName = SingleKind | 'multi';
/** A fault the model injects (see Fault). */
export type FaultName = 'lost-reply' | 'kill-lock-connection' | 'kill-pubsub-connection' | 'sigstop';

const client = fc.constantFrom<ClientIndex>(0, 1, 2);
const owner = fc.constantFrom<OwnerPick>(...OWNER_PICKS);
const lease = fc.constantFrom<LeasePick>('default', 'default', 'watchdog', 1_500, 3_000);
const how = fc.constantFrom<'tryLock' | 'lock'>('tryLock', 'lock');
const pick = fc.nat({ max: 1_000 });

/** The faults of `faults` as arbitraries (`standalone`: between commands, where no reply can be lost). */
function faultArbs(faults: readonly FaultName[], standalone: boolean): fc.Arbitrary<Fault>[] {
  const arbs: fc.Arbitrary<Fault>[] = [];
  const afterMs = standalone ? fc.constant(0) : fc.constantFrom(0, 1, 3);
  if (faults.includes('lost-reply') && !standalone) arbs.push(fc.constant<Fault>({ kind: 'lost-reply' }));
  for (const connection of ['lock', 'pubsub'] as const) {
    if (!faults.includes(`kill-${connection}-connection`)) continue;
    arbs.push(fc.record({ kind: fc.constant('kill' as const), connection: fc.constant(connection), afterMs }));
  }
  if (faults.includes('sigstop')) {
    arbs.push(fc.record({ kind: fc.constant('sigstop' as const), ms: fc.constantFrom(100, 250, 400) }));
  }
  return arbs;
}

/** The steps over `kinds` with `faults` around about one command in four. */
export function stepArbitrary(kinds: readonly KindName[], faults: readonly FaultName[]): fc.Arbitrary<Step> {
  const single = SINGLE_KINDS.filter((k) => kinds.includes(k));
  const owned = OWNED_KINDS.filter((k) => kinds.includes(k));
  const members = MEMBER_KINDS.filter((k) => kinds.includes(k));
  const withFault = faultArbs(faults, false);
  const alone = faultArbs(faults, true);
  const fault: fc.Arbitrary<Fault> =
    withFault.length === 0
      ? fc.constant({ kind: 'none' })
      : fc.oneof(
          { weight: 3 * withFault.length, arbitrary: fc.constant<Fault>({ kind: 'none' }) },
          ...withFault.map((arbitrary) => ({ weight: 1, arbitrary })),
        );
  const steps: fc.WeightedArbitrary<Step>[] = [
    { weight: 9, arbitrary: fc.record({ op: fc.constant('release' as const), pick, fault }) },
    { weight: 5, arbitrary: fc.record({ op: fc.constant('reenter' as const), pick, client, how, lease, fault }) },
    { weight: 1, arbitrary: fc.record({ op: fc.constant('idle' as const), ms: fc.constantFrom(50, 400, 1_500) }) },
  ];
  if (single.length > 0) {
    const kind = fc.constantFrom(...single);
    const permits = fc.constantFrom<1 | 2>(1, 2);
    const acquire = fc.record({ op: fc.constant('acquire' as const), client, kind, owner, permits, how, lease, fault });
    const waitMs = fc.constantFrom(300, 800);
    const wait = fc.record({ op: fc.constant('wait' as const), client, kind, owner, lease, waitMs });
    steps.push({ weight: 10, arbitrary: acquire }, { weight: 2, arbitrary: wait });
  }
  if (owned.length > 0) {
    const kind = fc.constantFrom(...owned);
    steps.push(
      { weight: 2, arbitrary: fc.record({ op: fc.constant('unlock' as const), client, kind, owner, fault }) },
      { weight: 1, arbitrary: fc.record({ op: fc.constant('forceUnlock' as const), client, kind, fault }) },
    );
  }
  if (kinds.includes('multi') && members.length >= 2) {
    const pair = fc
      .uniqueArray(fc.constantFrom(...members), { minLength: 2, maxLength: 2 })
      .map((k) => k as [MemberKind, MemberKind]);
    const clients = fc.tuple(client, client);
    const multi = fc.record({ op: fc.constant('multi' as const), clients, kinds: pair, owner, how, lease, fault });
    steps.push({ weight: 2, arbitrary: multi });
  }
  if (alone.length > 0) {
    const standalone = fc.record({ op: fc.constant('fault' as const), client, fault: fc.oneof(...alone) });
    steps.push({ weight: 1, arbitrary: standalone });
  }
  return fc.oneof(...steps);
}

/** One step as a line of the printed sequence. */
export function describeStep(step: Step): string {
  const fault = 'fault' in step && step.op !== 'fault' ? describeFault(step.fault) : '';
  switch (step.op) {
    case 'acquire': {
      const permits = step.kind === 'semaphore' ? ` permits=${step.permits}` : '';
      return `c${step.client} ${step.how} ${step.kind} owner=${step.owner} lease=${step.lease}${permits}${fault}`;
    }
    case 'wait':
      return `c${step.client} waits ${step.waitMs} ms (in the background) for ${step.kind} owner=${step.owner} lease=${step.lease}`;
    case 'reenter':
      return `re-enter live handle #${step.pick} (explicit owner: via c${step.client}) ${step.how} lease=${step.lease}${fault}`;
    case 'release':
      return `release live handle #${step.pick}${fault}`;
    case 'unlock':
      return `c${step.client} ${step.kind}.unlock({ owner: ${step.owner} })${fault}`;
    case 'forceUnlock':
      return `c${step.client} ${step.kind}.forceUnlock()${fault}`;
    case 'multi':
      return (
        `MultiLock[c${step.clients[0]} ${step.kinds[0]}, c${step.clients[1]} ${step.kinds[1]}] ${step.how} ` +
        `owner=${step.owner} lease=${step.lease}${fault}`
      );
    case 'idle':
      return `idle ${step.ms} ms`;
    case 'fault':
      return `fault on c${step.client}:${describeFault(step.fault)}`;
  }
}

export function describeFault(fault: Fault): string {
  switch (fault.kind) {
    case 'none':
      return '';
    case 'lost-reply':
      return ' [lost reply]';
    case 'kill':
      return ` [CLIENT KILL ${fault.connection} +${fault.afterMs} ms]`;
    case 'sigstop':
      return ` [SIGSTOP ${fault.ms} ms]`;
  }
}
