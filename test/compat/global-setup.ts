/**
 * Jest global setup of the compatibility suite (jest.compat.config.js). Unlike the main suite's, it
 * starts no shared topology (the suite runs its own private Redis). It tags this run, so that Ctrl-C or
 * a crash of jest still stops that Redis (test/support/exit-handlers.ts) and the app processes the test
 * started (app-pids.ts); global-teardown.ts stops whatever the test file could not.
 */
import { randomUUID } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RUN_ID_ENV } from '../../scripts/redis-topology';
import { installTopologyExitHandlers } from '../support/exit-handlers';
import { APP_PIDS_ENV, killRecordedApps } from './app-pids';

declare global {
  // On globalThis because jest's global setup and teardown may not share a module registry.
  var __compatAppsExitHandler: (() => void) | undefined;
}

export default function globalSetup(): void {
  // Set before jest starts the test file, which inherits them: its private Redis is tagged with the run
  // id, and it records its app processes in this file.
  const runId = (process.env[RUN_ID_ENV] = randomUUID());
  const appPids = (process.env[APP_PIDS_ENV] = join(tmpdir(), `nestjs-redis-lock-compat-${runId}.pids.json`));
  installTopologyExitHandlers(runId, []); // on SIGINT / SIGTERM: stop the Redis, then process.exit()
  const killApps = (): void => killRecordedApps(appPids);
  process.on('exit', killApps);
  globalThis.__compatAppsExitHandler = killApps;
}
