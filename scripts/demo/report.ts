/** The demo's results: one row per version, the table, and the verdict that sets the exit code. */
import { LOCKED_VERSIONS, VERSION_DESCRIPTIONS, type Version } from './args';
import type { LoadResult } from './load';

export interface VersionRow {
  version: Version;
  description: string;
  /** Requests sent. */
  expected: number;
  /** Requests answered 200 {"count": n}. */
  ok: number;
  /** Requests that failed (non-200, bad body, network error, timeout). */
  errors: number;
  errorSamples: string[];
  /** The counter after the run. */
  counted: number;
  /** Increments acknowledged with 200 but missing from the counter: ok - counted (negative: over-counted). */
  lost: number;
  /** counted === expected and no request failed. */
  exact: boolean;
  /** v3, v4, v5: a distributed lock, so it must be exact. */
  mustBeExact: boolean;
  wallMs: number;
  p50Ms: number;
  p99Ms: number;
  /** Answered requests per app instance ("127.0.0.1:3101": 333). */
  perInstance: Record<string, number>;
}

export function buildRow(version: Version, load: LoadResult, counted: number): VersionRow {
  return {
    version,
    description: VERSION_DESCRIPTIONS[version],
    expected: load.requests,
    ok: load.ok,
    errors: load.errors,
    errorSamples: load.errorSamples,
    counted,
    lost: load.ok - counted,
    exact: counted === load.requests && load.errors === 0,
    mustBeExact: LOCKED_VERSIONS.includes(version),
    wallMs: round(load.wallMs),
    p50Ms: round(percentile(load.latenciesMs, 50)),
    p99Ms: round(percentile(load.latenciesMs, 99)),
    perInstance: load.perUpstream,
  };
}

/** Nearest-rank percentile of an ascending array; NaN when empty. */
export function percentile(sortedAsc: readonly number[], p: number): number {
  if (sortedAsc.length === 0) return NaN;
  const rank = Math.ceil((p / 100) * sortedAsc.length);
  return sortedAsc[Math.min(sortedAsc.length, Math.max(1, rank)) - 1];
}

const round = (ms: number): number => Math.round(ms * 10) / 10;

export function formatMs(ms: number): string {
  if (!Number.isFinite(ms)) return '-';
  if (ms >= 1000) return `${(ms / 1000).toFixed(2)} s`;
  return ms >= 10 ? `${Math.round(ms)} ms` : `${ms.toFixed(1)} ms`;
}

function spread(perInstance: Record<string, number>): string {
  const entries = Object.entries(perInstance).sort(([a], [b]) => a.localeCompare(b, 'en', { numeric: true }));
  return entries.length > 0 ? entries.map(([, n]) => n).join(' / ') : '-';
}

/** The table (right-aligned numbers), a line per version saying what it does, and the verdict. */
export function formatTable(rows: readonly VersionRow[]): string {
  const header = ['version', 'expected', 'counted', 'lost', 'errors', 'wall', 'p50', 'p99', 'per app'];
  const body = rows.map((r) => [
    r.version,
    String(r.expected),
    String(r.counted),
    String(r.lost),
    String(r.errors),
    formatMs(r.wallMs),
    formatMs(r.p50Ms),
    formatMs(r.p99Ms),
    spread(r.perInstance),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((cells) => cells[i].length)));
  const line = (cells: string[]): string =>
    cells
      .map((cell, i) => (i === 0 || i === cells.length - 1 ? cell.padEnd(widths[i]) : cell.padStart(widths[i])))
      .join('  ')
      .trimEnd();
  const out = [line(header), line(widths.map((w) => '-'.repeat(w))), ...body.map(line), ''];
  for (const r of rows) out.push(`${r.version}  ${r.description}`);
  for (const r of rows) {
    for (const sample of r.errorSamples) out.push(`${r.version}  error: ${sample}`);
  }
  const { failures } = verdict(rows);
  out.push('');
  if (failures.length > 0) {
    out.push(...failures.map((f) => `FAIL ${f}`));
  } else {
    const locked = rows.filter((r) => r.mustBeExact).map((r) => r.version);
    if (locked.length > 0) out.push(`OK: ${locked.join(', ')} counted every request.`);
  }
  const lossy = rows.filter((r) => !r.mustBeExact && r.lost > 0).map((r) => `${r.version} lost ${r.lost}`);
  if (lossy.length > 0) out.push(`Without a distributed lock: ${lossy.join(', ')}.`);
  return out.join('\n');
}

/** ok when every version with a distributed lock counted exactly every request. */
export function verdict(rows: readonly VersionRow[]): { ok: boolean; failures: string[] } {
  const failures = rows
    .filter((r) => r.mustBeExact && !r.exact)
    .map(
      (r) =>
        `${r.version} counted ${r.counted} of ${r.expected} requests` +
        (r.errors > 0 ? ` (${r.errors} failed: ${r.errorSamples.join('; ')})` : ''),
    );
  return { ok: failures.length === 0, failures };
}
