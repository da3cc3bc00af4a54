import type { WaitAnchor } from '../holds/hand-over-lease';

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

  /** The anchors a grant in the message may be believed from, the latest first (see handOverFirstLease). */
  get anchors(): readonly (WaitAnchor | undefined)[] {
    return [this.latest, this.first];
  }
}
