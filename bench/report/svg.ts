import { CONTENDER_LABELS, OURS, contendersFor, type ContenderId } from '../lib/contenders';
import type { BenchResults } from './markdown';

/** A hand-written SVG: horizontal bar panels, one bar per contender. No dependencies. */

interface Panel {
  title: string;
  unit: string;
  log?: boolean;
  bars: { id: ContenderId; value: number }[];
}

const PLOT_WIDTH = 220;
const PANEL_PITCH = 300;
const LABEL_WIDTH = 170;
const BAR_HEIGHT = 18;
const BAR_GAP = 8;
const TOP = 86;

const escape = (s: string): string => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

function colour(id: ContenderId): string {
  if (OURS.has(id)) return '#2f6fb3';
  if (id === 'raw') return '#b8b8b8';
  return '#e08a2c';
}

function format(value: number): string {
  if (!Number.isFinite(value)) return 'n/a';
  if (value >= 100) return value.toFixed(0);
  if (value >= 10) return value.toFixed(1);
  return value.toFixed(2);
}

function panel(p: Panel, plotX: number, withLabels: boolean): string {
  const out: string[] = [];
  const plotWidth = PLOT_WIDTH;
  const finite = p.bars.map((b) => b.value).filter((v) => Number.isFinite(v) && v > 0);
  const maxValue = Math.max(...finite, 1e-9);
  const minLog = p.log ? Math.floor(Math.log10(Math.min(...finite, 1))) : 0;
  const maxLog = p.log ? Math.ceil(Math.log10(maxValue)) : 0;
  const scale = (v: number): number => {
    if (!Number.isFinite(v) || v <= 0) return 0;
    if (!p.log) return (v / maxValue) * plotWidth;
    return ((Math.log10(v) - minLog) / Math.max(1e-9, maxLog - minLog)) * plotWidth;
  };
  out.push(`<text x="${plotX}" y="${TOP - 30}" class="title">${escape(p.title)}</text>`);
  out.push(`<text x="${plotX}" y="${TOP - 14}" class="unit">${escape(p.unit)}${p.log ? ' (log scale)' : ''}</text>`);
  p.bars.forEach((b, i) => {
    const y = TOP + i * (BAR_HEIGHT + BAR_GAP);
    if (withLabels) {
      out.push(
        `<text x="${plotX - 8}" y="${y + BAR_HEIGHT - 5}" class="label" text-anchor="end">${escape(CONTENDER_LABELS[b.id])}</text>`,
      );
    }
    const w = Math.max(1, scale(b.value));
    out.push(`<rect x="${plotX}" y="${y}" width="${w.toFixed(1)}" height="${BAR_HEIGHT}" fill="${colour(b.id)}"/>`);
    out.push(
      `<text x="${(plotX + w + 4).toFixed(1)}" y="${y + BAR_HEIGHT - 5}" class="value">${format(b.value)}</text>`,
    );
  });
  const axisY = TOP + p.bars.length * (BAR_HEIGHT + BAR_GAP);
  out.push(`<line x1="${plotX}" y1="${TOP - 4}" x2="${plotX}" y2="${axisY}" class="axis"/>`);
  return out.join('\n  ');
}

export function renderSvg(results: BenchResults): string | undefined {
  const hot = results.hotKey;
  if (!hot) return undefined;
  const ids = contendersFor(results.config.contenders, 'locks').filter((id) => hot.rows[id]);
  const panels: Panel[] = [
    {
      title: `Hot key throughput (${hot.processes} processes)`,
      unit: 'acquisitions / s, higher is better',
      bars: ids.map((id) => ({ id, value: hot.rows[id]!.perSecond })),
    },
    {
      title: 'Hot key wait p99',
      unit: 'ms, lower is better',
      bars: ids.map((id) => ({ id, value: hot.rows[id]!.waitP99 })),
    },
  ];
  const hundred = results.waiters?.levels.find((l) => l.waiters === 1000) ?? results.waiters?.levels.at(-1);
  if (hundred) {
    panels.push({
      title: `${hundred.waiters} waiters: Redis commands / acquisition`,
      unit: 'a script call = 1, lower is better',
      log: true,
      bars: ids.map((id) => ({ id, value: hundred.rows[id]?.commandsPerAcq ?? NaN })),
    });
  }
  const height = TOP + ids.length * (BAR_HEIGHT + BAR_GAP) + 56;
  const body = panels.map((p, i) => panel(p, LABEL_WIDTH + i * PANEL_PITCH, i === 0)).join('\n  ');
  const width = LABEL_WIDTH + panels.length * PANEL_PITCH + 40;
  const legendY = height - 22;
  const m = results.machine;
  return `<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="Helvetica, Arial, sans-serif">
  <style>
    .title { font-size: 13px; font-weight: bold; fill: #222; }
    .unit { font-size: 11px; fill: #555; }
    .label { font-size: 11px; fill: #222; }
    .value { font-size: 10px; fill: #333; }
    .note { font-size: 10px; fill: #666; }
    .axis { stroke: #888; stroke-width: 1; }
  </style>
  <rect x="0" y="0" width="${width}" height="${height}" fill="#ffffff"/>
  <text x="10" y="22" class="title">nestjs-redis-lock benchmarks: medians of ${results.config.rounds} interleaved round(s), ${escape(m.date.slice(0, 10))}</text>
  ${body}
  <rect x="10" y="${legendY - 9}" width="10" height="10" fill="#2f6fb3"/><text x="24" y="${legendY}" class="note">ours</text>
  <rect x="60" y="${legendY - 9}" width="10" height="10" fill="#e08a2c"/><text x="74" y="${legendY}" class="note">peer libraries</text>
  <rect x="160" y="${legendY - 9}" width="10" height="10" fill="#b8b8b8"/><text x="174" y="${legendY}" class="note">raw SET NX floor</text>
  <text x="290" y="${legendY}" class="note">${escape(`${m.cpuModel}, ${m.cores} cores, Node ${m.node}, Redis ${m.redis}; ${results.pinning.applied ? 'Redis pinned to CPU 0, clients to CPU 1' : 'not pinned'}. See docs/benchmarks.md.`)}</text>
</svg>
`;
}
