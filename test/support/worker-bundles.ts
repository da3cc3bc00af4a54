/**
 * Test workers (test/workers/*.ts) bundled once per jest run into plain JavaScript, so that each of
 * the hundreds of worker processes a run starts loads one file with node instead of the library's
 * TypeScript through tsx's loader (about 1 s of CPU per process on this machine, against 0.3 s).
 * The bundles live in .scratch/test-workers/ (test-workers-<shift>/ under a port shift) inside the repository, so that the library's Lua loader
 * (which looks for lua/ above its own file) and node_modules resolve as from the sources. A worker
 * without a bundle (a jest run that skipped the global setup) runs under tsx as before.
 */
import { existsSync, rmSync } from 'node:fs';
import { basename, join } from 'node:path';
import { build } from 'esbuild';

const ROOT = join(__dirname, '..', '..');
export const WORKERS_DIR = join(ROOT, 'test', 'workers');
// One directory per port shift: two runs on one checkout (REDIS_TOPOLOGY_PORT_SHIFT) each build their own.
const BUNDLE_DIR = join(
  ROOT,
  '.scratch',
  `test-workers${process.env.REDIS_TOPOLOGY_PORT_SHIFT ? `-${process.env.REDIS_TOPOLOGY_PORT_SHIFT}` : ''}`,
);

/** Builds every worker's bundle afresh (the global setup calls it before any test runs). */
export async function bundleWorkers(entryPoints: string[]): Promise<void> {
  rmSync(BUNDLE_DIR, { recursive: true, force: true });
  await build({
    entryPoints,
    outdir: BUNDLE_DIR,
    bundle: true,
    platform: 'node',
    target: 'node20',
    format: 'cjs',
    packages: 'external', // node_modules stay require()s, resolved from the repository
    sourcemap: true,
    tsconfig: join(ROOT, 'tsconfig.json'),
    logLevel: 'error',
  });
}

/** The command line that runs worker `script` (a .ts path): its bundle when there is one, else tsx. */
export function workerCommand(script: string): string[] {
  const bundle = join(BUNDLE_DIR, basename(script, '.ts') + '.js');
  return script.startsWith(WORKERS_DIR + '/') && existsSync(bundle)
    ? ['--enable-source-maps', bundle]
    : ['--import', 'tsx', script];
}
