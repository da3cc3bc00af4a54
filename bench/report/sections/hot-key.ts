import { type ContenderId } from '../../lib/contenders';
import type { HotKeyResult } from '../../scenarios/hot-key';
import { int, n, pct, table, us } from '../cells';
import { prose } from '../prose';
import { label } from './common';

/** "14 windows: 1,587 → 1,267 → 1,654 → … → 2,464 → 2,519" */
export function summariseWarmup(rates: number[]): string {
  const shown = rates.length <= 7 ? rates.map(int) : [...rates.slice(0, 3).map(int), '…', ...rates.slice(-3).map(int)];
  return `${rates.length} windows: ${shown.join(' → ')}`;
}

export interface HotKeyText {
  title: string;
  /** What a holder does inside the lock, from "Inside the lock each holder" on. */
  criticalSection: string;
  /** Warm-up: acquisitions per process on average, and the most 1 s windows it may take. */
  warmupGrants: number;
  warmupMaxWindows: number;
}

export function hotKeySection(h: HotKeyResult, ids: ContenderId[], rttMs: number, text: HotKeyText): string {
  const rows = ids.filter((id) => h.rows[id]);
  return [
    prose('hot-key', 'section', {
      title: text.title,
      processes: String(h.processes),
      windowS: String(h.windowMs / 1000),
      criticalSection: text.criticalSection,
      rttUs: us(rttMs),
    }),
    '',
    ...(h.warmup
      ? [
          prose('hot-key', 'warmup', { grants: int(text.warmupGrants), maxWindows: String(text.warmupMaxWindows) }),
          '',
          table(
            ['Contender', 'warm-up windows'],
            rows.map((id) => [label(id), summariseWarmup(h.warmup?.[id] ?? [])]),
            ['l', 'l'],
          ),
          '',
        ]
      : []),
    table(
      [
        'Contender',
        'acq/s',
        'hand-off p50 ms',
        'p99 ms',
        'to other process',
        'wait p50 ms',
        'wait p99 ms',
        'wait max ms',
        'Jain',
        'lost updates',
        'commands/acq',
        'incl. Lua',
        'client CPU ms/acq',
        'Redis CPU ms/acq',
        'give-ups',
      ],
      rows.map((id) => {
        const r = h.rows[id]!;
        return [
          label(id),
          int(r.perSecond),
          n(r.handoffP50),
          n(r.handoffP99),
          pct(r.crossProcessShare),
          n(r.waitP50),
          n(r.waitP99, 1),
          int(r.waitMax),
          n(r.jain, 3),
          String(r.lostUpdates),
          n(r.commandsPerAcq),
          n(r.executedPerAcq, 1),
          n(r.clientCpuPerAcqMs, 3),
          n(r.redisCpuPerAcqMs, 3),
          int(r.giveUps),
        ];
      }),
    ),
  ].join('\n');
}
