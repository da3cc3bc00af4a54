/** How the report writes numbers and tables (shared by bench/report/markdown.ts and the sections in their own files). */

export const n = (v: number | undefined, digits = 2): string =>
  v !== undefined && Number.isFinite(v) ? v.toFixed(digits) : 'n/a';
export const int = (v: number | undefined): string =>
  v !== undefined && Number.isFinite(v) ? Math.round(v).toLocaleString('en-US') : 'n/a';
export const us = (ms: number | undefined): string =>
  ms !== undefined && Number.isFinite(ms) ? `${Math.round(ms * 1000)}` : 'n/a';
export const pct = (v: number | undefined): string =>
  v !== undefined && Number.isFinite(v) ? `${Math.round(v * 100)}%` : 'n/a';

/** A markdown table; the first column left-aligned and the others right-aligned unless `align` says otherwise. */
export function table(headers: string[], rows: string[][], align?: ('l' | 'r')[]): string {
  const a = align ?? headers.map((_, i) => (i === 0 ? 'l' : 'r'));
  return [
    `| ${headers.join(' | ')} |`,
    `| ${a.map((x) => (x === 'l' ? ':--' : '--:')).join(' | ')} |`,
    ...rows.map((r) => `| ${r.join(' | ')} |`),
  ].join('\n');
}
