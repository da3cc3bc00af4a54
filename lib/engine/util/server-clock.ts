/**
 * Where a moment of Redis's clock sits on this process's clock, from below. A reply that read the
 * server's clock (`serverMs`, e.g. TIME in a script) to a command sent at `sentAt` (monotonicNow)
 * proves that this server moment came no earlier than `sentAt` here.
 */
export interface ServerClockAnchor {
  readonly sentAt: number;
  readonly serverMs: number;
}

/** A lease as a command sent at `sentAt` (monotonicNow) would have set it (see leaseEnd). */
export interface LeaseFrom {
  sentAt: number;
  leaseMs: number;
}

/**
 * A lease of `leaseMs` that the same server started at `grantServerMs`, when no request of ours set it
 * (a grant handed over in a message): it is taken as a lease of `grantServerMs - anchor.serverMs +
 * leaseMs` set by the anchor's command, so leaseEnd's drift margin covers the whole span, the wait
 * included. Undefined when the anchor is later than the grant: it bounds nothing before itself.
 * Both times must come from one server's clock: after a failover the anchor says nothing.
 */
export function leaseFromAnchor(
  anchor: ServerClockAnchor,
  grantServerMs: number,
  leaseMs: number,
): LeaseFrom | undefined {
  const elapsed = grantServerMs - anchor.serverMs;
  if (!(elapsed >= 0) || !(leaseMs > 0)) return undefined;
  return { sentAt: anchor.sentAt, leaseMs: elapsed + leaseMs };
}
