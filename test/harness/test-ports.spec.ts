import { DEV_BASE_PORTS, TEST_BASE_PORTS, TOPOLOGY_KINDS, type TopologyKind } from '../../scripts/redis-topology';
import { PRIVATE_PORTS, type PortRange } from '../../scripts/test-ports';

/** Ports each kind of topology uses from its base (see scripts/redis-topology.ts). */
const SPAN: Record<TopologyKind, number> = { single: 1, replica: 4, sentinel: 9, cluster: 6, multi: 5 };

/** The port map of the tests and the bench: no two users of a port, and cluster buses clear of them all. */
describe('test ports (scripts/test-ports.ts)', () => {
  const ranges: [string, PortRange][] = [
    ...Object.entries(PRIVATE_PORTS),
    ...TOPOLOGY_KINDS.map((kind): [string, PortRange] => [
      `test ${kind}`,
      { base: TEST_BASE_PORTS[kind], span: SPAN[kind] },
    ]),
    ...TOPOLOGY_KINDS.map((kind): [string, PortRange] => [
      `dev ${kind}`,
      { base: DEV_BASE_PORTS[kind], span: SPAN[kind] },
    ]),
  ];

  it('no two ranges overlap', () => {
    const sorted = [...ranges].sort(([, a], [, b]) => a.base - b.base);
    const clashes = sorted.flatMap(([name, r], i) => {
      const next = sorted[i + 1];
      return next && r.base + r.span > next[1].base
        ? [`${name} (${r.base}+${r.span}) meets ${next[0]} (${next[1].base})`]
        : [];
    });
    expect(clashes).toEqual([]);
  });

  it('every range stays in 7100-7499, so cluster bus ports (port + 10000) meet none of them', () => {
    for (const [, r] of ranges) {
      expect(r.base).toBeGreaterThanOrEqual(7100);
      expect(r.base + r.span - 1).toBeLessThanOrEqual(7499);
    }
  });
});
