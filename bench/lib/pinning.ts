import { spawnSync } from 'node:child_process';
import * as os from 'node:os';

export interface Pinning {
  applied: boolean;
  description: string;
}

function taskset(args: string[]): boolean {
  const r = spawnSync('taskset', args, { stdio: 'ignore' });
  return r.status === 0;
}

/**
 * Redis on CPU 0, this process (and so every worker it spawns, which inherit the mask) on CPU 1,
 * when `taskset` exists and there are at least two CPUs. Silently skipped otherwise.
 */
export function pinApart(redisPid: number): Pinning {
  if (os.cpus().length < 2 || spawnSync('taskset', ['-V'], { stdio: 'ignore' }).status !== 0) {
    return { applied: false, description: 'not pinned (taskset or a second CPU missing)' };
  }
  const redisPinned = taskset(['-a', '-p', '-c', '0', String(redisPid)]);
  const selfPinned = taskset(['-a', '-p', '-c', '1', String(process.pid)]);
  if (redisPinned && selfPinned) {
    return {
      applied: true,
      description: 'redis-server on CPU 0; the bench and its worker processes on CPU 1 (taskset)',
    };
  }
  return { applied: false, description: 'not pinned (taskset failed)' };
}

/** Puts more redis-server processes on redis-server's CPU (0), after pinApart applied. */
export function pinBesideRedis(redisPids: number[]): boolean {
  return redisPids.every((pid) => taskset(['-a', '-p', '-c', '0', String(pid)]));
}
