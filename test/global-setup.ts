/**
 * Jest global setup: bundle the test workers (see test/support/worker-bundles.ts), then start the five
 * shared topologies on TEST_BASE_PORTS (7100-7149), in parallel since their port blocks are disjoint. Tests find them through test/support/topologies.ts, which
 * reads the topology.json each one persists in its state dir. test/global-teardown.ts stops them.
 */
import { randomUUID } from 'node:crypto';
import {
  RUN_ID_ENV,
  startTopology,
  stopTopology,
  TEST_BASE_PORTS,
  TOPOLOGY_KINDS,
  TOPOLOGY_STATE_ROOT,
} from '../scripts/redis-topology';
import { installTopologyExitHandlers, removeTopologyExitHandlers } from './support/exit-handlers';
import { SHARED_STATE_DIRS } from './support/topologies';
import { bundleWorkers, WORKERS_DIR } from './support/worker-bundles';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';

export default async function globalSetup(): Promise<void> {
  const started = Date.now();
  // Set before jest forks its workers, so their private topologies carry this run's id too.
  const runId = (process.env[RUN_ID_ENV] = randomUUID());
  installTopologyExitHandlers(runId, SHARED_STATE_DIRS);
  const workers = readdirSync(WORKERS_DIR).filter((file) => file.endsWith('.ts'));
  await bundleWorkers(workers.map((file) => join(WORKERS_DIR, file)));
  const results = await Promise.allSettled(
    TOPOLOGY_KINDS.map((kind) => startTopology(kind, { basePort: TEST_BASE_PORTS[kind], name: `test-${kind}` })),
  );
  const failures = results.flatMap((r) => (r.status === 'rejected' ? [r.reason as unknown] : []));
  if (failures.length > 0) {
    // Jest skips global teardown when setup throws, so stop the ones that did start here (only
    // those: a dir we could not claim belongs to another run).
    const startedHere = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
    await Promise.all(startedHere.map((t) => stopTopology(t).catch(() => undefined)));
    removeTopologyExitHandlers();
    const messages = failures.map((err) => (err instanceof Error ? err.message : String(err)));
    throw new Error(`could not start the shared Redis test topologies:\n\n${messages.join('\n\n')}`);
  }
  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  process.stderr.write(`\nRedis test topologies ready in ${seconds}s (state under ${TOPOLOGY_STATE_ROOT})\n`);
}
