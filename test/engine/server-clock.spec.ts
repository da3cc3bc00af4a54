import { leaseEnd } from '../../lib/engine/util/clock';
import { leaseFromAnchor } from '../../lib/engine/util/server-clock';

/**
 * A grant handed over in a message has no request of the holder's to count its lease from: it is
 * counted from an earlier reply that read the same server's clock (the anchor).
 */
describe('a lease counted from a server clock anchor', () => {
  const anchor = { sentAt: 1_000, serverMs: 50_000 };

  it('spans from the anchor to the grant plus the lease, so the belief ends no later than Redis', () => {
    // Granted 4 s of server time after the anchor's reply, with a 1 s lease: Redis ends it at server
    // 55,000, which is at least local 5,000 (the anchor's server moment came after local 1,000).
    const lease = leaseFromAnchor(anchor, 54_000, 1_000);
    expect(lease).toEqual({ sentAt: 1_000, leaseMs: 5_000 });
    const believedUntil = leaseEnd(lease!.sentAt, lease!.leaseMs, 0.01);
    expect(believedUntil).toBeLessThanOrEqual(1_000 + 5_000 - 50); // the drift margin covers the wait too
  });

  it('bounds nothing from an anchor later than the grant, or for a lease that is not positive', () => {
    expect(leaseFromAnchor(anchor, 49_999, 1_000)).toBeUndefined();
    expect(leaseFromAnchor(anchor, Number.NaN, 1_000)).toBeUndefined();
    expect(leaseFromAnchor(anchor, 50_000, 0)).toBeUndefined();
  });
});
