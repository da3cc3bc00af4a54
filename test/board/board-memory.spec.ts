import { EventLog } from '../../lib/board/event-log';
import { LabelStats, OTHER_LABELS, percentile, STATS_BUCKET_MS, STATS_WINDOW_MS } from '../../lib/board/label-stats';

/** What the board keeps in memory is bounded: events in a ring, labels capped, samples per bucket. */
describe('lock board memory', () => {
  it('keeps the last events only, newest first', () => {
    const log = new EventLog(3);
    for (let i = 0; i < 5; i++) log.add({ at: i, type: 'acquired', name: `n${i}` });
    expect(log.recent().map((e) => e.name)).toEqual(['n4', 'n3', 'n2']);
  });

  it('counts acquisitions and percentiles per label over the window, caps labels, and forgets old buckets', () => {
    let now = 1_000 * STATS_BUCKET_MS;
    const stats = new LabelStats(2, () => now);
    for (let i = 1; i <= 100; i++) stats.acquired('orders:{id}', i);
    stats.released('orders:{id}', 7);
    stats.acquired('invoice:{id}', 5);
    stats.acquired('third', 1);
    stats.acquired('fourth', 1);
    now += STATS_BUCKET_MS;
    stats.acquired('orders:{id}', 1000);
    const rows = stats.rows();
    expect(rows.map((r) => r.label)).toEqual(['orders:{id}', OTHER_LABELS, 'invoice:{id}']);
    expect(rows[0]).toMatchObject({ acquisitions: 101, waitP50: 51, waitP99: 100, holdP50: 7, holdP99: 7 });
    expect(rows[0].perBucket.slice(-2)).toEqual([100, 1]);
    expect(rows[0].perBucket).toHaveLength(STATS_WINDOW_MS / STATS_BUCKET_MS);
    expect(rows[1].acquisitions).toBe(2);
    now += STATS_WINDOW_MS;
    expect(stats.rows()).toEqual([]);
  });

  it('keeps a bounded sample of a hot label', () => {
    const stats = new LabelStats(1, () => 0);
    for (let i = 0; i < 100_000; i++) stats.acquired('hot', i % 100);
    const [row] = stats.rows();
    expect(row.acquisitions).toBe(100_000);
    expect(row.waitP99).toBeGreaterThanOrEqual(90);
    expect(percentile([], 50)).toBeNull();
    expect(percentile([3, 1, 2], 50)).toBe(2);
  });
});
