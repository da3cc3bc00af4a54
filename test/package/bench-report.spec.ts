import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { renderMarkdown, type BenchResults } from '../../bench/report/markdown';
import type { RedLockContendedRound, RedLockResult, RedLockUncontendedRow } from '../../bench/scenarios/red-lock';
import { evaluateTargets } from '../../bench/report/targets';
import * as proseModule from '../../bench/report/prose';

// The report needs the contenders' names, not the compiled library the bench measures (dist/lib), and
// prettier 3 cannot be loaded inside jest (it is run as a command below).
jest.mock('../../bench/lib/subject', () => ({}));
jest.mock('../../bench/report/format', () => ({}));

const root = join(__dirname, '..', '..');
const proseDir = join(root, 'bench', 'report', 'prose');
const published = (): BenchResults =>
  JSON.parse(readFileSync(join(root, 'docs', 'benchmarks.json'), 'utf8')) as BenchResults;

/** A RedLock result of two rounds in which ours misses its targets (docs/benchmarks.json may have none). */
function redLockResult(): RedLockResult {
  const uncontended = (acquireP50: number): RedLockUncontendedRow => ({
    acquireP50,
    acquireP99: 2 * acquireP50,
    releaseP50: acquireP50,
    releaseP99: 2 * acquireP50,
    pingP50: 0.2,
    acquireRtt: acquireP50 / 0.2,
    releaseRtt: acquireP50 / 0.2,
    clientCpuUs: 300,
    commandsPerCycle: 10,
    redisUs: 300,
  });
  const contended = (perSecond: number, jain: number): RedLockContendedRound => ({
    perSecond,
    commandsPerAcq: 12,
    executedPerAcq: 40,
    clientCpuPerAcqMs: 1.5,
    redisUsPerAcq: 400,
    waitP50: 20,
    waitP99: 400,
    jain,
    lostUpdates: 0,
    giveUps: 0,
  });
  const rows = <T extends object>(rounds: T[]) => ({ ...rounds[0], rounds });
  return {
    masters: 5,
    processes: 8,
    sectionMs: 1,
    warmupMs: 2_000,
    windowMs: 5_000,
    iterations: 1_500,
    rounds: 2,
    rttMs: 0.2,
    uncontended: {
      'red-lock': rows([uncontended(0.5), uncontended(0.55)]),
      'redlock-masters': rows([uncontended(0.4), uncontended(0.4)]),
    },
    contended: {
      'red-lock': rows([contended(100, 0.99), contended(90, 0.98)]),
      'redlock-masters': rows([contended(150, 0.6), contended(140, 0.6)]),
    },
  };
}

/** The published results, changed so that the report takes the paths the published run did not. */
function variants(): BenchResults[] {
  const other = published();
  other.config.quick = true;
  const hot = other.hotKey!;
  delete hot.warmup;
  for (const round of hot.rows.fair!.rounds) round.executedByCommand.subscribe = 1; // subscription churn
  other.waiters!.levels[0].rows.raw!.lostUpdates = 3;
  const hundred = other.waiters!.levels.find((l) => l.waiters === 100)!;
  hundred.rows.fair!.commandsPerAcq = 9;
  // Counting inside Lua, both kinds over their bounds (the fair lock's 5, the reentrant lock's processes + 4).
  hundred.rows.fair!.executedPerAcq = 28;
  hundred.rows.reentrant!.executedPerAcq = 40;
  other.watchdog!.roundTrips = 1_000;
  hot.rows.reentrant!.jain = 0.5;
  const uncontended = other.uncontended!.rows;
  uncontended.reentrant!.clientCpuUs = 2 * uncontended['reentrant-no-otel']!.clientCpuUs; // telemetry costs
  // The semaphore's targets met: no paragraph on it.
  const permits = other.shared!.rows.permits!;
  [permits.perSecond, permits.commandsPerAcq, permits.clientCpuPerAcqMs] = [1e9, 1, 0];
  // Many names measured in the same run, and one contender leaving keys without a TTL after the idle
  // period (the published run leaves none: its text is the other path).
  const names = other.names!;
  delete names.separateRun;
  const [leaving] = Object.values(names.rows);
  leaving!.samples.idle = { ...leaving!.samples.before, keys: 1_000, noTtl: 1_000, shapes: {} };
  other.redLock = redLockResult();
  const empty = published();
  for (const key of [
    'uncontended',
    'parallel',
    'hotKey',
    'hotKey1ms',
    'shared',
    'waiters',
    'watchdog',
    'names',
    'redLock',
  ] as const)
    delete empty[key];
  delete empty.startup;
  delete empty.failover;
  // The FIFO permit floor measured, on each side of the peer's rate (the semaphore's paragraph says
  // which holds ours back: the order, or our client's CPU).
  const withFloor = (share: number) => {
    const results = published();
    const peer = results.shared!.rows['rs-semaphore']!;
    results.shared!.rows['permit-floor'] = { ...peer, perSecond: share * peer.perSecond };
    return results;
  };
  return [published(), other, empty, withFloor(0.5), withFloor(1)];
}

describe('the benchmark report (bench/report)', () => {
  it('renders docs/benchmarks.md from docs/benchmarks.json unchanged', () => {
    const file = join(root, 'docs', 'benchmarks.md');
    // Formatted as bench/report/format.ts formats it, with the repository's prettier config.
    const formatted = execFileSync(
      process.execPath,
      [require.resolve('prettier/bin/prettier.cjs'), '--stdin-filepath', file],
      {
        cwd: root,
        input: renderMarkdown(published()),
        encoding: 'utf8',
      },
    );
    expect(formatted).toBe(readFileSync(file, 'utf8'));
  });

  it("gives a throughput target our rate divided by the peer's round by round, next to the medians' verdict", () => {
    const results = published();
    const hot = results.hotKey!;
    const [ours, peer] = [hot.rows.reentrant!, hot.rows.semaphore!];
    // Three rounds in which ours runs at 0.5, 1.25 and 0.9 times redis-semaphore, the best peer.
    for (const row of Object.values(hot.rows)) row.perSecond = 800;
    ours.rounds.forEach((round, i) => (round.perSecond = [500, 1_250, 900][i]));
    peer.rounds.forEach((round) => (round.perSecond = 1_000));
    [ours.perSecond, peer.perSecond] = [900, 1_000];
    const row = evaluateTargets(results).find(
      (r) => r.target === 'Hot key: throughput ≥ best peer' && r.lock === 'reentrant',
    );
    expect(row).toMatchObject({ measured: '900/s (0.50–1.25 × it, round by round)', met: false });
    expect(row!.bound).toContain('redis-semaphore');
  });

  it('shows a target whose only peer starved its waiters as not judged, and leaves it out of the count', () => {
    const results = published();
    results.redLock = redLockResult(); // ours 100/s against 150/s from a peer at Jain 0.6
    const contended = (r: BenchResults) =>
      evaluateTargets(r).find((row) => row.target === 'RedLock: contended throughput ≥ 1.0 × @sesamecare-oss/redlock');
    const starving = contended(results)!;
    expect(starving).toMatchObject({ met: false, notJudged: 'its waiters starved (Jain 0.600 < 0.9)' });
    const judged = evaluateTargets(results).filter((row) => row.notJudged === undefined);
    const header = (r: BenchResults) => /(\d+) of (\d+) met([^.]*)\./.exec(renderMarkdown(r))!;
    const [, met, total, more] = header(results);
    expect([Number(met), Number(total)]).toEqual([judged.filter((row) => row.met).length, judged.length]);
    expect(more).toContain('one more row not judged');
    expect(renderMarkdown(results)).toMatch(/\| RedLock: contended throughput[^\n]*\| not judged: its waiters starved/);

    // The same peer with fair waiters sets the bound again: judged, and missed.
    for (const round of results.redLock.contended['redlock-masters']!.rounds) round.jain = 0.95;
    results.redLock.contended['redlock-masters']!.jain = 0.95;
    expect(contended(results)).toMatchObject({ met: false });
    expect(contended(results)!.notJudged).toBeUndefined();
    const [, , totalAfter, moreAfter] = header(results);
    expect(Number(totalAfter)).toBe(Number(total) + 1);
    expect(moreAfter).toBe('');
    expect(renderMarkdown(results)).toMatch(/\| RedLock: contended throughput[^\n]*\| \*\*missed\*\*/);
  });

  it('uses every block of the prose files and fills every placeholder', () => {
    const used = new Set<string>();
    const fill = proseModule.prose;
    const prose = jest.spyOn(proseModule, 'prose').mockImplementation((section, block, values) => {
      used.add(`${section}/${block}`);
      return fill(section, block, values);
    });
    try {
      for (const results of variants()) expect(renderMarkdown(results)).not.toContain('{{');
    } finally {
      prose.mockRestore();
    }
    const blocks = readdirSync(proseDir).flatMap((file) =>
      [...readFileSync(join(proseDir, file), 'utf8').matchAll(/^<!-- block: ([\w-]+) -->$/gm)].map(
        (m) => `${file.replace(/\.md$/, '')}/${m[1]}`,
      ),
    );
    expect(blocks.filter((block) => !used.has(block))).toEqual([]);
  });
});
