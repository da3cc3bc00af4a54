import { leaseEnd } from '../util/clock';
import { leaseFromAnchor, type LeaseFrom, type ServerClockAnchor } from '../util/server-clock';
import type { ConnectionMark } from '../redis/connection-mark';

/**
 * What a fair lock's hand-over message tells its wait, after '<waiter id>|' (see
 * lua/include/fair-queue.lua): a grant in the message (the hold recorded under `holdId`, the id the
 * wait registered, at Redis time `serverMs` with the acceptance lease), or an offer to accept.
 */
export type HandOverMessage =
  { kind: 'grant'; token: number; serverMs: number; holdId: string } | { kind: 'offer'; token: number };

const GRANT = /^(\d+):(\d+):([^:|]+)$/;
const OFFER = /^\d+$/;

/** The message's meaning; undefined for text of neither shape (not a hand-over). */
export function parseHandOver(payload: string): HandOverMessage | undefined {
  if (OFFER.test(payload)) return { kind: 'offer', token: Number(payload) };
  const grant = GRANT.exec(payload);
  if (!grant) return undefined;
  return { kind: 'grant', token: Number(grant[1]), serverMs: Number(grant[2]), holdId: grant[3] };
}

/** A refused attempt's reply that read Redis's clock, and the connection it came on. */
export interface WaitAnchor extends ServerClockAnchor {
  readonly connection: ConnectionMark;
}

/**
 * What one wait (a lock() or tryLock() call) of a fair lock knows for a grant in a message: the hold
 * ids its attempts registered in the queue (the grant names one of them), and server clock anchors
 * from its refused attempts. The first anchor comes before any hand-over to the wait (the wait queued
 * with it); the latest is usually the closest before the grant.
 */
export class FairWait {
  private readonly holdIds = new Set<string>();
  private first?: WaitAnchor;
  private latest?: WaitAnchor;

  constructor(readonly waiterId: string) {}

  /** An attempt of this wait is sent with `holdId`: a hand-over may record the hold under it. */
  registering(holdId: string): void {
    this.holdIds.add(holdId);
  }

  /** Whether `holdId` is the id of an attempt of this wait (a grant naming another is not for it). */
  registered(holdId: string): boolean {
    return this.holdIds.has(holdId);
  }

  anchored(anchor: WaitAnchor): void {
    this.first ??= anchor;
    this.latest = anchor;
  }

  /**
   * The first lease of a grant made at Redis time `grantMs` with lease `leaseMs`, believed from the
   * anchor that gives the latest end among those that can vouch for it: taken no later than the grant,
   * on a connection still open to the same server (`current`), and agreeing with this process's clock
   * (no more server time between the anchor and the grant than local time since the anchor was sent,
   * give or take Redis's millisecond and the drift share). Undefined when none can.
   */
  firstLease(
    grantMs: number,
    leaseMs: number,
    now: number,
    driftFactor: number,
    current: (connection: ConnectionMark) => boolean,
  ): LeaseFrom | undefined {
    let best: LeaseFrom | undefined;
    for (const anchor of [this.latest, this.first]) {
      if (!anchor || !current(anchor.connection)) continue;
      const localSpan = now - anchor.sentAt;
      if (grantMs - anchor.serverMs > localSpan * (1 + driftFactor) + 1) continue;
      const lease = leaseFromAnchor(anchor, grantMs, leaseMs);
      if (lease && (!best || endOf(lease, driftFactor) > endOf(best, driftFactor))) best = lease;
    }
    return best;
  }
}

function endOf(lease: LeaseFrom, driftFactor: number): number {
  return leaseEnd(lease.sentAt, lease.leaseMs, driftFactor);
}
