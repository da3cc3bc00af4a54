import type { LockClient } from '../engine/client/lock-client';
import type {
  LockAcquiredEvent,
  LockKindName,
  LockReleasedEvent,
  LockTimedOutEvent,
} from '../engine/client/lock-events';
import type { LockLostError } from '../engine/errors';
import type { ScannedKind } from '../engine/redis/key-scan';
import { EventLog, type BoardEvent } from './event-log';
import { LabelStats } from './label-stats';

/** What this process last knew of a name from its own events: its kind and label. */
export interface KnownName {
  kind: LockKindName;
  label?: string;
  family: ScannedKind;
  /** When this process last acquired it (epoch ms). */
  at: number;
}

/** Names remembered for their kind and label; the oldest is forgotten first. */
const MAX_KNOWN_NAMES = 2000;

const familyOf = (kind: LockKindName): ScannedKind =>
  kind === 'read' || kind === 'write' ? 'read-write' : kind === 'semaphore' ? 'semaphore' : 'lock';

/**
 * This process's lock events, as the board shows them: the recent ones (a ring), statistics per label,
 * and the kind and label of the names it used lately (Redis does not store a lock's kind or label).
 * It listens on the client while open; other processes' events are theirs.
 */
export class LockActivity {
  readonly events: EventLog;
  readonly stats: LabelStats;
  private readonly known = new Map<string, KnownName>();

  constructor(
    private readonly client: LockClient,
    maxEvents: number,
    maxLabels: number,
  ) {
    this.events = new EventLog(maxEvents);
    this.stats = new LabelStats(maxLabels);
    client.on('acquired', this.onAcquired);
    client.on('released', this.onReleased);
    client.on('timedOut', this.onTimedOut);
    client.on('lockLost', this.onLost);
  }

  close(): void {
    this.client.off('acquired', this.onAcquired);
    this.client.off('released', this.onReleased);
    this.client.off('timedOut', this.onTimedOut);
    this.client.off('lockLost', this.onLost);
  }

  /** The kind and label this process last used `name` with, if it did lately. */
  knownName(name: string): KnownName | undefined {
    return this.known.get(name);
  }

  /** Names this process acquired in the last `withinMs`: shown before a scan reaches them. */
  acquiredSince(withinMs: number): [string, KnownName][] {
    const since = Date.now() - withinMs;
    return [...this.known].filter(([, known]) => known.at >= since);
  }

  /** Records a force-unlock made from the board. */
  forced(name: string, kind: string, holders: string[]): void {
    const reason = `force-unlocked from the board; was held by ${holders.join(', ') || 'nobody'}`;
    this.events.add({ at: Date.now(), type: 'forced', name, kind, reason });
  }

  private remember(name: string, kind: LockKindName, label: string | undefined): void {
    this.known.delete(name);
    this.known.set(name, { kind, label, family: familyOf(kind), at: Date.now() });
    if (this.known.size > MAX_KNOWN_NAMES) this.known.delete(this.known.keys().next().value!);
  }

  private statsLabel(kind: LockKindName, label: string | undefined): string {
    return label ?? `${kind} (no label)`;
  }

  private add(event: Omit<BoardEvent, 'at'>): void {
    this.events.add({ at: Date.now(), ...event });
  }

  private readonly onAcquired = (e: LockAcquiredEvent): void => {
    if (e.kind === 'redlock') return; // on several deployments: not one lock of this prefix
    this.remember(e.name, e.kind, e.label);
    if (e.reentered) return;
    this.stats.acquired(this.statsLabel(e.kind, e.label), e.waitedMs);
    const { name, kind, owner, label, waitedMs } = e;
    this.add({ type: 'acquired', name, kind, owner, label, waitedMs });
  };

  private readonly onReleased = (e: LockReleasedEvent): void => {
    if (e.kind === 'redlock' || e.outcome === 'decremented') return;
    this.stats.released(this.statsLabel(e.kind, e.label), e.heldMs);
    const { name, kind, owner, label, heldMs } = e;
    if (e.outcome === 'expired') {
      this.add({
        type: 'expired',
        name,
        kind,
        owner,
        label,
        heldMs,
        reason: 'its lease had run out before the release',
      });
    } else {
      const reason = e.outcome === 'pending' ? 'Redis has not confirmed it yet; retried in the background' : undefined;
      this.add({ type: 'released', name, kind, owner, label, heldMs, reason });
    }
  };

  private readonly onTimedOut = (e: LockTimedOutEvent): void => {
    if (e.kind === 'redlock') return;
    const { name, kind, owner, label, waitedMs } = e;
    this.add({ type: 'timed-out', name, kind, owner, label, waitedMs, reason: `gave up after ${waitedMs} ms` });
  };

  private readonly onLost = (error: LockLostError): void => {
    const name = error.key ?? '';
    const known = this.known.get(name);
    const type = error.reason === 'lease-expired' ? 'expired' : 'lost';
    this.add({ type, name, kind: known?.kind, owner: error.owner, label: known?.label, reason: error.reason });
  };
}
