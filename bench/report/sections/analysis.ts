import { POLLING, type ContenderId } from '../../lib/contenders';
import { int, n, pct, us } from '../cells';
import { prose } from '../prose';
import { best as bestOf, STARVING_JAIN, type TargetRow } from '../targets';
import type { BenchResults } from '../results';
import type { SharedRow } from '../../scenarios/shared';
import { commandsPerAcq, each, label } from './common';

/**
 * The fair lock's throughput target against the wake-one FIFO floor (bench/lib/hand-off-floor.ts),
 * when it was missed and the floor ran: how far the least a lock that moves at every grant can do
 * gets on this machine, in each hot-key scenario.
 */
export function fifoFloorAnalysis(r: BenchResults, fairMissed: boolean): string | undefined {
  const scenarios = [
    { name: 'the hot key', result: r.hotKey },
    { name: 'the 1 ms section', result: r.hotKey1ms },
  ].flatMap(({ name, result }) => {
    const floor = result?.rows['hand-off-floor'];
    const fair = result?.rows.fair;
    const best = result && bestOf([...POLLING], result.rows, (row) => row.perSecond, 'max');
    return floor && fair && best ? [{ name, floor, fair, best }] : [];
  });
  if (!fairMissed || scenarios.length === 0) return undefined;
  return prose('analysis', 'fifo-floor', {
    scenarios: each(scenarios, (s) => s.name),
    'floor.rate': each(scenarios, (s) => `${int(s.floor.perSecond)}/s`),
    'floor.share': each(scenarios, (s) => `${n(s.floor.perSecond / s.best.value)}×`),
    bestPeers: each(scenarios, (s) => label(s.best.id)),
    'floor.crossProcessShare': each(scenarios, (s) => pct(s.floor.crossProcessShare)),
    'fair.share': each(scenarios, (s) => `${n(s.fair.perSecond / s.best.value)}×`),
    'fair.ofFloor': each(scenarios, (s) => `${n(s.fair.perSecond / s.floor.perSecond)}×`),
  });
}

export function analysis(r: BenchResults, targets: TargetRow[]): string {
  const out: string[] = [prose('analysis', 'heading'), ''];
  const missed = (prefix: string): TargetRow[] =>
    targets.filter((t) => !t.met && t.notJudged === undefined && t.target.startsWith(prefix));
  const u = r.uncontended;
  const h = r.hotKey;
  const w = r.waiters;
  const rtt = u?.rttMs ?? NaN;
  const level = (waiters: number) => w?.levels.find((l) => l.waiters === waiters);

  if (missed('Uncontended').length > 0 && u) {
    const ours = (['reentrant', 'fair', 'simple'] as const).filter((id) => u.rows[id]);
    const raw = u.rows.raw;
    const redlock = u.rows.redlock;
    out.push(
      prose('analysis', 'uncontended', {
        'ours.acquireRtt': ours.map((id) => `${n(u.rows[id]!.acquireRtt)} RTT (${label(id)})`).join(', '),
        'ours.releaseRtt': each(ours, (id) => n(u.rows[id]!.releaseRtt)),
        'raw.acquireRtt': n(raw?.acquireRtt),
        'raw.releaseRtt': n(raw?.releaseRtt),
        'redlock.acquireRtt': n(redlock?.acquireRtt),
        'redlock.releaseRtt': n(redlock?.releaseRtt),
        rttUs: us(rtt),
        'ours.redisUs': each(ours, (id) => n(u.rows[id]!.redisUs, 1)),
        'raw.redisUs': n(raw?.redisUs, 1),
        'ours.clientCpuUs': each(ours, (id) => int(u.rows[id]!.clientCpuUs)),
        'raw.clientCpuUs': int(raw?.clientCpuUs),
        'ours.excessUs': each(ours, (id) => us(u.rows[id]!.acquireP50 - rtt)),
        'ours.excessAtHalfMsRtt': each(ours, (id) => n(1 + (u.rows[id]!.acquireP50 - rtt) / 0.5)),
      }),
      '',
    );
    const redisson = u.rows['redisson-script'];
    if (redisson) {
      out.push(
        prose('analysis', 'uncontended-floor', {
          acquireRtt: n(redisson.acquireRtt),
          releaseRtt: n(redisson.releaseRtt),
          redisUs: n(redisson.redisUs, 1),
          'ours.aboveFloorUs': each(ours, (id) => us(u.rows[id]!.acquireP50 - redisson.acquireP50)),
          'ours.ofFloor': each(ours, (id) => `${n(u.rows[id]!.acquireP50 / redisson.acquireP50)}×`),
        }),
        '',
      );
    }
  }

  const noSdk = missed('No-SDK telemetry');
  if (noSdk.length > 0) {
    out.push(
      prose('analysis', 'no-sdk', {
        missed: noSdk
          .map((t) =>
            prose('analysis', 'missed-no-sdk', {
              target: t.target.replace('No-SDK telemetry: ', ''),
              measured: t.measured,
            }),
          )
          .join('; '),
      }),
      '',
    );
  }

  if (h) {
    const ours = (['reentrant', 'fair', 'simple'] as const).filter((id) => h.rows[id]);
    const turns = ours.filter((id) => id !== 'fair');
    const peers = (['redlock', 'redlock-10ms', 'semaphore', 'raw'] as const).filter((id) => h.rows[id]);
    const util = (id: ContenderId, which: 'client' | 'redis'): number => {
      const row = h.rows[id]!;
      return (row.perSecond * (which === 'client' ? row.clientCpuPerAcqMs : row.redisCpuPerAcqMs)) / 1000;
    };
    const hotMissed = [
      'Hot key: throughput',
      'Hot key: hand-off',
      'Hot key: wait',
      'Hot key: max wait',
      'Hot key: fewer',
      'Hot key: ≤ 3',
    ].some((t) => missed(t).length > 0);
    if (hotMissed) {
      const churn = ours.map((id) => commandsPerAcq(h.rows[id]!, ['subscribe', 'unsubscribe']));
      const churnValues = { churn: each(churn, (c) => n(c)) };
      const two = level(1);
      out.push(
        prose('analysis', 'hot-key', {
          'ours.redisBusy': each(ours, (id) => pct(util(id, 'redis'))),
          loadStart: n(r.machine.loadStart),
          loadEnd: n(r.machine.loadEnd),
          'ours.clientCpuMs': each(ours, (id) => n(h.rows[id]!.clientCpuPerAcqMs, 2)),
          'ours.clientBusy': each(ours, (id) => pct(util(id, 'client'))),
          'peers.clientCpuMs': each(peers, (id) => n(h.rows[id]!.clientCpuPerAcqMs, 2)),
          peers: each(peers, label),
          'peers.crossProcessShare': each(peers, (id) => pct(h.rows[id]!.crossProcessShare)),
          'peers.waitMax': each(peers, (id) => int(h.rows[id]!.waitMax)),
          'raw.waitMax': int(h.rows.raw?.waitMax),
          'turns.crossProcessShare': turns
            .map((id) =>
              prose('analysis', 'turn-share', { contender: label(id), share: pct(h.rows[id]!.crossProcessShare) }),
            )
            .join('; '),
          'turns.waitMax': each(turns, (id) => int(h.rows[id]!.waitMax)),
          'turns.jain': each(turns, (id) => n(h.rows[id]!.jain, 3)),
          'fair.handoffP50': n(h.rows.fair?.handoffP50),
          twoProcesses: two ? prose('analysis', 'two-processes', { handoffP50: n(two.rows.fair?.handoffP50) }) : '',
          'turns.commandsPerAcq': each(turns, (id) => n(h.rows[id]!.commandsPerAcq)),
          'turns.rate': each(turns, (id) => int(h.rows[id]!.perSecond)),
          'peers.bestRate': int(Math.max(...peers.map((id) => h.rows[id]!.perSecond))),
          'fair.commandsPerAcq': n(h.rows.fair?.commandsPerAcq),
          subscriptions:
            Math.max(...churn) > 0.1
              ? prose('analysis', 'subscription-churn', {
                  ...churnValues,
                  fairAt100: n(level(100)?.rows.fair?.commandsPerAcq),
                })
              : prose('analysis', 'no-subscription-churn', churnValues),
          'peers.commandsAt100': each(peers, (id) => n(level(100)?.rows[id]?.commandsPerAcq)),
          'peers.commandsAt1000': each(peers, (id) => n(level(1000)?.rows[id]?.commandsPerAcq)),
          'ours.commandsAt1000': each(ours, (id) => n(level(1000)?.rows[id]?.commandsPerAcq)),
          'fair.rateAt1000': int(level(1000)?.rows.fair?.perSecond),
          'peers.rateAt1000': each(peers, (id) => int(level(1000)?.rows[id]?.perSecond)),
        }),
        '',
      );
      const fair = h.rows.fair;
      if (fair && peers.length > 0) {
        const best = peers.reduce((a, b) => (h.rows[a]!.perSecond >= h.rows[b]!.perSecond ? a : b));
        const handingOver = peers.filter((id) => h.rows[id]!.crossProcessShare >= 0.01);
        const hogs = peers.filter((id) => h.rows[id]!.crossProcessShare < 0.01);
        out.push(
          prose('analysis', 'fair-against-polling', {
            'fair.crossProcessShare': pct(fair.crossProcessShare),
            'peers.crossHandoffP50': each(peers, (id) => n(h.rows[id]!.crossHandoffP50)),
            'peers.handoffP50': each(peers, (id) => n(h.rows[id]!.handoffP50)),
            'fair.handoffP50': n(fair.handoffP50),
            'fair.handoffRtt': n(fair.handoffP50 / rtt, 1),
            'fair.rate': int(fair.perSecond),
            'fair.shareOfPeers': peers
              .map((id) =>
                prose('analysis', 'share-of-peer', {
                  share: pct(fair.perSecond / h.rows[id]!.perSecond),
                  peer: label(id),
                }),
              )
              .join(', '),
            bestPeer: label(best),
            'fair.clientCpuMs': n(fair.clientCpuPerAcqMs, 2),
            'fair.waitP99': n(fair.waitP99, 1),
            'fair.fifoWaitMs': n((7 / fair.perSecond) * 1000, 1),
            lowerThanHandingOver:
              handingOver.length > 0
                ? prose('analysis', 'lower-than', {
                    ratios: each(handingOver, (id) => `${n(h.rows[id]!.waitP99 / fair.waitP99, 0)}×`),
                    peers: each(handingOver, label),
                    waitP99: each(handingOver, (id) => n(h.rows[id]!.waitP99, 1)),
                  })
                : 'n/a',
            hogs:
              hogs.length > 0
                ? prose('analysis', 'hogs', {
                    peers: each(hogs, label),
                    waitP99: each(hogs, (id) => n(h.rows[id]!.waitP99, 1)),
                    retaken: each(hogs, (id) => pct(1 - h.rows[id]!.crossProcessShare)),
                    waitMax: each(hogs, (id) => int(h.rows[id]!.waitMax)),
                    jain: each(hogs, (id) => n(h.rows[id]!.jain, 3)),
                  })
                : '',
            'fair.waitMax': int(fair.waitMax),
            'fair.jain': n(fair.jain, 3),
          }),
          '',
        );
      }
    }
    if (missed('Hot key: Jain').length > 0) {
      out.push(
        prose('analysis', 'fairness', {
          missed: missed('Hot key: Jain')
            .map((t) =>
              prose('analysis', 'missed-fairness', { lock: label(t.lock), measured: t.measured, bound: t.bound }),
            )
            .join('; '),
        }),
        '',
      );
    }
  }

  const missed1ms = missed('Hot key, 1 ms:');
  const h1 = r.hotKey1ms;
  if (missed1ms.length > 0 && h1) {
    const ours1 = (['reentrant', 'simple'] as const).filter((id) => h1.rows[id]);
    const polling1 = (['redlock', 'redlock-10ms', 'semaphore', 'raw'] as const).filter((id) => h1.rows[id]);
    out.push(
      prose('analysis', 'hot-key-1ms', {
        missed: missed1ms
          .map((t) =>
            prose('analysis', 'missed-1ms', {
              lock: label(t.lock),
              target: t.target.slice('Hot key, 1 ms: '.length),
              measured: t.measured,
              bound: t.bound,
            }),
          )
          .join('; '),
        'ours.crossProcessShare': each(ours1, (id) => pct(h1.rows[id]!.crossProcessShare)),
        'polling.crossProcessShare': each(polling1, (id) => pct(h1.rows[id]!.crossProcessShare)),
        'ours.crossHandoffP50': each(ours1, (id) => n(h1.rows[id]!.crossHandoffP50)),
        'ours.clientCpuMs': each(ours1, (id) => n(h1.rows[id]!.clientCpuPerAcqMs, 2)),
        'polling.clientCpuMs': each(polling1, (id) => n(h1.rows[id]!.clientCpuPerAcqMs, 2)),
      }),
      '',
    );
  }

  const fifoFloor = fifoFloorAnalysis(
    r,
    missed('Hot key: throughput ≥ the wake-one').length + missed('Hot key, 1 ms: throughput ≥ the wake-one').length > 0,
  );
  if (fifoFloor) out.push(fifoFloor, '');

  const semaphore = missed('Semaphore');
  const permits = r.shared?.rows.permits;
  const peerSemaphore = r.shared?.rows['rs-semaphore'];
  if (semaphore.length > 0 && permits && peerSemaphore) {
    out.push(
      prose('analysis', 'semaphore', {
        missed: semaphore.map((t) => `${t.target.replace('Semaphore: ', '')} (${t.measured})`).join('; '),
        'ours.sentPerAcq': n(permits.sentPerAcq),
        'ours.commandsPerAcq': n(permits.commandsPerAcq),
        'peer.commandsPerAcq': n(peerSemaphore.commandsPerAcq),
        'ours.clientCpuMs': n(permits.clientCpuPerAcqMs, 2),
        'peer.clientCpuMs': n(peerSemaphore.clientCpuPerAcqMs, 2),
        'ours.executedPerAcq': n(permits.executedPerAcq, 1),
        'peer.executedPerAcq': n(peerSemaphore.executedPerAcq, 1),
        'ours.jain': n(permits.jain, 3),
        'peer.jain': n(peerSemaphore.jain, 3),
        floor: permitFloorSentence(permits, peerSemaphore, r.shared?.rows['permit-floor']),
      }),
      '',
    );
  }

  const redLock = redLockAnalysis(r, missed('RedLock'));
  if (redLock) out.push(redLock, '');

  if (missed('100 waiters').length > 0 && w) {
    out.push(
      prose('analysis', 'hundred-waiters', {
        missed: missed('100 waiters')
          .map((t) =>
            prose('analysis', 'missed-100-waiters', { lock: label(t.lock), measured: t.measured, bound: t.bound }),
          )
          .join('; '),
      }),
      '',
    );
  }
  const hundred = level(100);
  if (hundred?.rows.fair && hundred.rows.reentrant) {
    const polling = ['redlock', 'redlock-10ms', 'semaphore', 'raw'] as const;
    const reentrantBound = hundred.processes + 4;
    out.push(
      prose('analysis', 'counting-inside-lua', {
        fair: n(hundred.rows.fair.executedPerAcq, 1),
        reentrant: n(hundred.rows.reentrant.executedPerAcq, 1),
        reentrantBound: String(reentrantBound),
        bothMissed:
          hundred.rows.fair.executedPerAcq > 5 && hundred.rows.reentrant.executedPerAcq > reentrantBound
            ? prose('analysis', 'both-missed')
            : '',
        pollingAt100: each(polling, (id) => n(hundred.rows[id]?.executedPerAcq, 1)),
        pollingAt1000: each(polling, (id) => n(level(1000)?.rows[id]?.executedPerAcq, 1)),
      }),
      '',
    );
  }
  if (missed('Watchdog').length > 0 && r.watchdog) {
    out.push(
      prose('analysis', 'watchdog', { roundTrips: n(r.watchdog.roundTrips, 0), locks: String(r.watchdog.locks) }),
      '',
    );
  }
  if (out.length === 2) out.push(prose('analysis', 'all-met'), '');
  return out.join('\n');
}

/** Our RedLock against `@sesamecare-oss/redlock` on the same masters, when a RedLock target was missed. */
function redLockAnalysis(r: BenchResults, missed: TargetRow[]): string | undefined {
  const u = r.redLock?.uncontended;
  const c = r.redLock?.contended;
  const [ours, peer, hot, hotPeer] = [u?.['red-lock'], u?.['redlock-masters'], c?.['red-lock'], c?.['redlock-masters']];
  if (missed.length === 0 || !ours || !peer || !hot || !hotPeer) return undefined;
  return prose('analysis', 'redlock', {
    missed: missed.map((t) => `${t.target.replace('RedLock: ', '')} (${t.measured})`).join('; '),
    'ours.acquireRtt': n(ours.acquireRtt),
    'ours.releaseRtt': n(ours.releaseRtt),
    'peer.acquireRtt': n(peer.acquireRtt),
    'peer.releaseRtt': n(peer.releaseRtt),
    'ours.clientCpuUs': int(ours.clientCpuUs),
    'peer.clientCpuUs': int(peer.clientCpuUs),
    'ours.redisUs': int(ours.redisUs),
    'peer.redisUs': int(peer.redisUs),
    'ours.perSecond': int(hot.perSecond),
    'peer.perSecond': int(hotPeer.perSecond),
    'ours.jain': n(hot.jain, 3),
    'peer.jain': n(hotPeer.jain, 3),
    'ours.commandsPerAcq': n(hot.commandsPerAcq),
    'peer.commandsPerAcq': n(hotPeer.commandsPerAcq),
    'ours.waitP99': n(hot.waitP99, 0),
    'peer.waitP99': n(hotPeer.waitP99, 0),
    starving:
      hotPeer.jain < STARVING_JAIN ? ` ${prose('analysis', 'redlock-starving', { bound: String(STARVING_JAIN) })}` : '',
  });
}

/**
 * What the FIFO permit hand-over floor (bench/lib/permit-floor.ts) ran at in the same run, against
 * redis-semaphore's and ours; empty when the run did not measure it.
 */
function permitFloorSentence(ours: SharedRow, peer: SharedRow, floor: SharedRow | undefined): string {
  if (!floor) return '';
  // One more sentence of the semaphore's paragraph.
  return (
    ' ' +
    prose('analysis', 'semaphore-floor', {
      'floor.rate': int(floor.perSecond),
      'floor.ofPeer': n(floor.perSecond / peer.perSecond),
      'floor.clientCpuMs': n(floor.clientCpuPerAcqMs, 2),
      'floor.jain': n(floor.jain, 3),
      'ours.ofFloor': n(ours.perSecond / floor.perSecond),
      'ours.cpuOfFloor': n(ours.clientCpuPerAcqMs / floor.clientCpuPerAcqMs),
      larger: ours.perSecond / floor.perSecond < floor.perSecond / peer.perSecond ? 'the second' : 'the first',
    })
  );
}
