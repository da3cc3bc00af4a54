import type { LockInspection } from '../engine/client/inspection';

const seconds = (ms: number): string => (ms >= 10_000 ? `${Math.round(ms / 1000)} s` : `${(ms / 1000).toFixed(1)} s`);

/** A lock inspection as a few lines for a terminal. */
export function formatInspection(i: LockInspection): string {
  const lines = [`${i.name} (key ${i.key}): ${i.state}`];
  for (const h of i.holders) {
    const holds =
      i.holdKind === 'token' ? 'token' : h.holdCount === 0 ? 'handed over, not yet accepted' : `holds ${h.holdCount}`;
    lines.push(`  holder ${h.owner}  ${holds}`);
  }
  const lease =
    i.remainingLeaseMs === null
      ? i.state === 'free'
        ? undefined
        : 'no expiry'
      : `${seconds(i.remainingLeaseMs)} left`;
  const facts = [lease && `lease ${lease}`, i.fencingToken !== null && `fencing token ${i.fencingToken}`].filter(
    Boolean,
  );
  if (facts.length > 0) lines.push(`  ${facts.join(', ')}`);
  if (i.queue.length > 0) {
    lines.push(`  queue (${i.queue.length}, first served first):`);
    for (const w of i.queue) lines.push(`    ${w.waiterId}  ${seconds(w.expiresInMs)} to its deadline`);
  }
  if (i.waitingClients.length > 0) lines.push(`  waiting processes: ${i.waitingClients.join(', ')}`);
  return lines.join('\n');
}
