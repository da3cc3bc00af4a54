/**
 * Jest global teardown of the compatibility suite: stops, by pid, any Redis this run started and any
 * app process it recorded (app-pids.ts) that are still running; normally the test file stopped them.
 */
import { RUN_ID_ENV, stateDirsOfRun, stopTopology } from '../../scripts/redis-topology';
import { removeTopologyExitHandlers } from '../support/exit-handlers';
import { APP_PIDS_ENV, killRecordedApps } from './app-pids';

export default async function globalTeardown(): Promise<void> {
  try {
    const appPids = process.env[APP_PIDS_ENV];
    if (appPids) killRecordedApps(appPids);
    const runId = process.env[RUN_ID_ENV];
    if (runId) await Promise.all(stateDirsOfRun(runId).map((dir) => stopTopology(dir)));
  } finally {
    removeTopologyExitHandlers();
    if (globalThis.__compatAppsExitHandler) process.removeListener('exit', globalThis.__compatAppsExitHandler);
    globalThis.__compatAppsExitHandler = undefined;
  }
}
