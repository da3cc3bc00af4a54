import { performance } from 'node:perf_hooks';
/**
 * What every tool shares: the topology harness and the demo (scripts/), the benchmarks (bench/) and
 * the test support. Addresses are the library's own: its HostPort type and host:port rules.
 */
export type { HostPort } from '../lib/connection/connection-options';
export { formatHostPort, parseHostPort, parseHostPorts, redisUrlAddress } from '../lib/connection/addresses';

/**
 * Resolves after `ms`. Unlike the library's own sleep, its timer keeps the process alive: a tool
 * that waits (a probe loop between short-lived connections, a worker between attempts) means to.
 */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** A LockLogger for warnings a tool expects (lost masters, lost locks under faults): dropped. */
export const silentLogger = { warn: (): void => undefined, error: (): void => undefined };

/**
 * High-resolution epoch milliseconds, comparable across the processes of one machine (to a few ms
 * under load): the clock the racers and the fault suite record critical sections with.
 */
export function epochNow(): number {
  return performance.timeOrigin + performance.now();
}
