import { n, pct } from '../cells';
import { prose } from '../prose';
import type { BenchResults } from '../results';
import { commandsPerAcq } from './common';

export function findingsSection(r: BenchResults): string {
  const h = r.hotKey;
  const w = r.waiters;
  const wd = r.watchdog;
  const fairHot = h?.rows.fair;
  const fair100 = w?.levels.find((l) => l.waiters === 100)?.rows.fair;
  const lines = [prose('findings', 'heading'), ''];
  const s = r.startup;
  if (s) {
    lines.push(
      prose('findings', 'pubsub-subscription', {
        forcedStalled: String(s.forced.stalled),
        forcedTrials: String(s.forced.trials),
        naturalStalled: String(s.natural.stalled),
        naturalTrials: String(s.natural.trials),
        serverSubscribers: (s.forced.serverSubscribers ?? []).join(', '),
      }),
    );
  }
  const fairChurn = fairHot && h ? commandsPerAcq(h.rows.fair!, ['subscribe', 'unsubscribe']) : 0;
  if (fairHot && fair100 && fairChurn > 0.1) {
    lines.push(
      prose('findings', 'subscription-churn', {
        churn: n(fairChurn),
        commandsPerAcq: n(fairHot.commandsPerAcq),
        commandsAt100: n(fair100.commandsPerAcq),
      }),
    );
  }
  if (h?.rows.reentrant) {
    lines.push(
      prose('findings', 'one-wake-up', {
        commandsPerAcq: n(h.rows.reentrant.commandsPerAcq),
        crossProcessShare: pct(h.rows.reentrant.crossProcessShare),
        jain: n(h.rows.reentrant.jain, 3),
      }),
    );
  }
  if (wd) {
    lines.push(
      prose('findings', 'renewal-cpu', {
        clientCpuMs: n(wd.clientCpuMs, 0),
        redisCpuMs: n(wd.redisCpuMs, 0),
        locks: wd.locks.toLocaleString('en-US'),
      }),
    );
  }
  return lines.join('\n');
}
