/** How far back the statistics reach, and the width of one sparkline bar. */
export const STATS_WINDOW_MS = 10 * 60_000;
export const STATS_BUCKET_MS = 20_000;
const BUCKETS = STATS_WINDOW_MS / STATS_BUCKET_MS;

/** Samples kept per bucket and measure: a reservoir, so a hot label costs bounded memory. */
const SAMPLES_PER_BUCKET = 256;

/** The label every label past `maxLabels` is counted under. */
export const OTHER_LABELS = '(other labels)';

/** One label's row: counts and percentiles over STATS_WINDOW_MS. */
export interface LabelRow {
  label: string;
  acquisitions: number;
  /** Acquisitions per STATS_BUCKET_MS, oldest first (the sparkline). */
  perBucket: number[];
  waitP50: number | null;
  waitP99: number | null;
  holdP50: number | null;
  holdP99: number | null;
}

class Samples {
  readonly values: number[] = [];
  private seen = 0;

  add(value: number): void {
    this.seen++;
    if (this.values.length < SAMPLES_PER_BUCKET) this.values.push(value);
    else {
      // Reservoir sampling: each of the `seen` values is kept with the same chance.
      const slot = Math.floor(Math.random() * this.seen);
      if (slot < SAMPLES_PER_BUCKET) this.values[slot] = value;
    }
  }
}

interface Bucket {
  index: number;
  acquisitions: number;
  waits: Samples;
  holds: Samples;
}

/** Nearest-rank percentile of unsorted `values`, null when there are none. */
export function percentile(values: number[], p: number): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

/**
 * Per label, over the last STATS_WINDOW_MS: acquisitions, wait and hold times. At most `maxLabels`
 * labels of their own (first come), the rest under OTHER_LABELS.
 */
export class LabelStats {
  private readonly labels = new Map<string, (Bucket | undefined)[]>();

  constructor(
    private readonly maxLabels: number,
    private readonly now: () => number = Date.now,
  ) {}

  acquired(label: string, waitedMs: number): void {
    const bucket = this.bucket(label);
    bucket.acquisitions++;
    bucket.waits.add(waitedMs);
  }

  released(label: string, heldMs: number): void {
    this.bucket(label).holds.add(heldMs);
  }

  rows(): LabelRow[] {
    const current = Math.floor(this.now() / STATS_BUCKET_MS);
    const rows: LabelRow[] = [];
    for (const [label, ring] of this.labels) {
      const live = (i: number) => {
        const bucket = ring[i % BUCKETS];
        return bucket && bucket.index === i ? bucket : undefined;
      };
      const buckets = Array.from({ length: BUCKETS }, (_, k) => live(current - BUCKETS + 1 + k));
      const waits = buckets.flatMap((b) => b?.waits.values ?? []);
      const holds = buckets.flatMap((b) => b?.holds.values ?? []);
      const perBucket = buckets.map((b) => b?.acquisitions ?? 0);
      const acquisitions = perBucket.reduce((a, b) => a + b, 0);
      if (acquisitions === 0 && holds.length === 0) continue;
      rows.push({
        label,
        acquisitions,
        perBucket,
        waitP50: percentile(waits, 50),
        waitP99: percentile(waits, 99),
        holdP50: percentile(holds, 50),
        holdP99: percentile(holds, 99),
      });
    }
    return rows.sort((a, b) => b.acquisitions - a.acquisitions || a.label.localeCompare(b.label));
  }

  private bucket(label: string): Bucket {
    if (!this.labels.has(label) && this.labels.size >= this.maxLabels) label = OTHER_LABELS;
    let ring = this.labels.get(label);
    if (!ring) this.labels.set(label, (ring = new Array<Bucket | undefined>(BUCKETS)));
    const index = Math.floor(this.now() / STATS_BUCKET_MS);
    let bucket = ring[index % BUCKETS];
    if (!bucket || bucket.index !== index) {
      bucket = { index, acquisitions: 0, waits: new Samples(), holds: new Samples() };
      ring[index % BUCKETS] = bucket;
    }
    return bucket;
  }
}
