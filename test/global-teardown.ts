/**
 * Jest global teardown: stop the shared topologies global-setup.ts started (by their recorded pids),
 * and any private topology a test of this run started but did not stop.
 */
import * as path from 'node:path';
import { RUN_ID_ENV, stateDirsOfRun, stopTopology } from '../scripts/redis-topology';
import { removeTopologyExitHandlers } from './support/exit-handlers';
import { SHARED_STATE_DIRS } from './support/topologies';

export default async function globalTeardown(): Promise<void> {
  try {
    const runId = process.env[RUN_ID_ENV];
    const leaked = runId ? stateDirsOfRun(runId).filter((dir) => !SHARED_STATE_DIRS.includes(dir)) : [];
    if (leaked.length > 0) {
      const names = leaked.map((dir) => path.basename(dir)).join(', ');
      process.stderr.write(`\nstopping Redis topologies that tests started but did not stop: ${names}\n`);
    }
    await Promise.all([...SHARED_STATE_DIRS, ...leaked].map((dir) => stopTopology(dir)));
  } finally {
    removeTopologyExitHandlers();
  }
}
