/**
 * Ctrl-C, kill or an unexpected exit of the jest process must not leave redis-servers running: the
 * shared topologies, nor the private ones tests of this run started (a terminal Ctrl-C kills the
 * jest workers mid-test, before their afterAll can stop them). Handlers only signal the recorded
 * pids (no waiting), so they also work from 'exit'; after a normal teardown they find nothing.
 */
import { stateDirsOfRun, terminateTopologySync } from '../../scripts/redis-topology';

declare global {
  // On globalThis because jest's global setup and teardown may not share a module registry.
  var __redisTopologyExitHandlers: (() => void) | undefined;
}

export function installTopologyExitHandlers(runId: string, sharedStateDirs: string[]): void {
  removeTopologyExitHandlers();
  const stopAll = (): void => {
    for (const dir of new Set([...sharedStateDirs, ...stateDirsOfRun(runId)])) terminateTopologySync(dir);
  };
  const onSignal = (signal: NodeJS.Signals): void => {
    stopAll();
    process.exit(signal === 'SIGINT' ? 130 : 143);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  process.on('exit', stopAll);
  globalThis.__redisTopologyExitHandlers = () => {
    process.removeListener('SIGINT', onSignal);
    process.removeListener('SIGTERM', onSignal);
    process.removeListener('exit', stopAll);
  };
}

export function removeTopologyExitHandlers(): void {
  globalThis.__redisTopologyExitHandlers?.();
  globalThis.__redisTopologyExitHandlers = undefined;
}
