import * as fs from 'node:fs';
import * as path from 'node:path';
import { POLLING, contendersFor } from '../lib/contenders';
import { formatLikeRepo } from './format';
import { manyNamesSection } from './many-names';
import { prose } from './prose';
import { renderSvg } from './svg';
import { evaluateTargets } from './targets';
import type { BenchResults } from './results';
import { analysis } from './sections/analysis';
import { label } from './sections/common';
import { failoverSection } from './sections/failover';
import { findingsSection } from './sections/findings';
import { header, targetsSection } from './sections/header';
import { hotKeySection } from './sections/hot-key';
import { instrumentationSection, sharedSection } from './sections/shared';
import { parallelSection, uncontendedSection } from './sections/uncontended';
import { redLockSection } from './sections/red-lock';
import { waitersSection } from './sections/waiters';
import { startupSection, watchdogSection } from './sections/watchdog';

/** The report, section by section (each in sections/, its words in prose/). */
export type { BenchResults } from './results';

export function renderMarkdown(r: BenchResults): string {
  const ids = r.config.contenders;
  const targets = evaluateTargets(r);
  const sections = [header(r), targetsSection(targets)];
  if (r.uncontended) sections.push(uncontendedSection(r.uncontended, ids));
  if (r.parallel) sections.push(parallelSection(r.parallel, ids));
  const rtt = r.uncontended?.rttMs ?? NaN;
  if (r.hotKey)
    sections.push(
      hotKeySection(r.hotKey, ids, rtt, {
        title: prose('hot-key', 'hot-title'),
        criticalSection: prose('hot-key', 'hot-critical-section'),
        warmupGrants: r.config.warmupGrantsPerProcess,
        warmupMaxWindows: r.config.warmupMaxWindows,
      }),
    );
  if (r.hotKey1ms) {
    const ms = String(r.hotKey1ms.sectionMs ?? r.config.hot1msSectionMs);
    sections.push(
      hotKeySection(r.hotKey1ms, ids, rtt, {
        title: prose('hot-key', '1ms-title', { ms }),
        criticalSection: prose('hot-key', '1ms-critical-section', { ms }),
        warmupGrants: r.config.hot1msWarmupGrantsPerProcess,
        warmupMaxWindows: r.config.hot1msWarmupMaxWindows,
      }),
    );
  }
  if (r.shared) sections.push(sharedSection(r.shared));
  if (r.waiters) sections.push(waitersSection(r.waiters, contendersFor(ids, 'locks')));
  const overhead = instrumentationSection(r);
  if (overhead) sections.push(overhead);
  if (r.watchdog) sections.push(watchdogSection(r.watchdog));
  if (r.startup) sections.push(startupSection(r.startup));
  if (r.failover) sections.push(failoverSection(r.failover));
  sections.push(redLockSection(r.redLock));
  if (r.names) sections.push(manyNamesSection(r.names));
  sections.push(analysis(r, targets), findingsSection(r));
  sections.push(
    prose('reproduce', 'section', {
      polling: [...POLLING].map(label).join(', '),
      rawResults: r.complete ? 'docs/benchmarks.json' : 'bench/out/results.json',
    }),
  );
  return sections.join('\n\n') + '\n';
}

/** Writes benchmarks.md (and benchmarks.svg when there is a hot-key result) into `outDir`. */
export async function writeReport(results: BenchResults, outDir: string): Promise<string[]> {
  fs.mkdirSync(outDir, { recursive: true });
  const written: string[] = [];
  const md = path.join(outDir, 'benchmarks.md');
  fs.writeFileSync(md, await formatLikeRepo(renderMarkdown(results), md));
  written.push(md);
  const svg = renderSvg(results);
  if (svg) {
    const file = path.join(outDir, 'benchmarks.svg');
    fs.writeFileSync(file, svg);
    written.push(file);
  }
  return written;
}
