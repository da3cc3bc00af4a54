import type { RedLockResult } from '../../scenarios/red-lock';
import { RED_LOCK_SUBJECTS } from '../../lib/red-lock-subjects';
import { int, n, table, us } from '../cells';
import { prose } from '../prose';
import { label } from './common';

/**
 * RedLock on five masters, ours against `@sesamecare-oss/redlock` (bench/scenarios/red-lock.ts); a run
 * without it (`--only` leaving it out, or a report of an earlier run) says it was not measured.
 */
export function redLockSection(r: RedLockResult | undefined): string {
  if (!r) return prose('red-lock', 'not-measured');
  const ids = RED_LOCK_SUBJECTS.filter((id) => r.uncontended[id] || r.contended[id]);
  const perRound = (id: (typeof ids)[number]) =>
    (r.contended[id]?.rounds ?? []).map((round) => int(round.perSecond)).join(' / ');
  return prose('red-lock', 'section', {
    masters: String(r.masters),
    iterations: String(r.iterations),
    rounds: r.rounds === 1 ? 'one round' : `each of ${r.rounds} rounds`,
    rttUs: us(r.rttMs),
    processes: String(r.processes),
    sectionMs: String(r.sectionMs),
    warmupS: String(r.warmupMs / 1000),
    windowS: String(r.windowMs / 1000),
    uncontendedTable: table(
      [
        'Contender',
        'acquire p50 µs',
        'p99 µs',
        'release p50 µs',
        'p99 µs',
        'acquire RTT',
        'release RTT',
        'client CPU µs',
        'commands',
        'Redis µs',
      ],
      ids.flatMap((id) => {
        const u = r.uncontended[id];
        if (!u) return [];
        return [
          [
            label(id),
            us(u.acquireP50),
            us(u.acquireP99),
            us(u.releaseP50),
            us(u.releaseP99),
            n(u.acquireRtt),
            n(u.releaseRtt),
            int(u.clientCpuUs),
            n(u.commandsPerCycle, 1),
            int(u.redisUs),
          ],
        ];
      }),
    ),
    contendedTable: table(
      [
        'Contender',
        'acquisitions / s',
        'round by round',
        'wait p50 ms',
        'wait p99 ms',
        'Jain',
        'commands / acq.',
        'incl. Lua',
        'client CPU / acq. µs',
        'Redis / acq. µs',
        'lost updates',
        'give-ups',
      ],
      ids.flatMap((id) => {
        const c = r.contended[id];
        if (!c) return [];
        return [
          [
            label(id),
            int(c.perSecond),
            perRound(id),
            n(c.waitP50, 1),
            n(c.waitP99, 1),
            n(c.jain, 3),
            n(c.commandsPerAcq),
            n(c.executedPerAcq, 1),
            int(c.clientCpuPerAcqMs * 1000),
            int(c.redisUsPerAcq),
            String(c.lostUpdates),
            String(c.giveUps),
          ],
        ];
      }),
    ),
  });
}
