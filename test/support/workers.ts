import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { basename, isAbsolute, join } from 'node:path';
import { workerCommand } from './worker-bundles';

/**
 * Debugging aid: `WORKER_STDERR_DIR=/tmp/w DEBUG='ioredis:*' npx jest …` keeps each worker's whole
 * stderr (ioredis's debug log with it) in `<dir>/<worker>-<pid>.log`; failure messages show only its end.
 */
const STDERR_DIR = process.env.WORKER_STDERR_DIR;

/** A test worker: a separate OS process running a file of test/workers (bundled, see worker-bundles.ts). */
export interface Worker {
  child: ChildProcess;
  /** Resolves with the JSON the worker printed last on stdout, when it exits with 0. */
  result: Promise<unknown>;
  /** Writes one line to the worker's stdin. */
  send(line: string): void;
  /** Resolves when the worker printed a line equal to `marker`. */
  waitFor(marker: string, timeoutMs?: number): Promise<void>;
  /** Its state and last output, for a failure message. */
  describe(): string;
}

/** `file`: a name in test/workers, or an absolute path. */
export function startWorker(file: string, env: Record<string, string | number>): Worker {
  const script = isAbsolute(file) ? file : join(__dirname, '..', 'workers', file);
  const child = spawn(process.execPath, workerCommand(script), {
    env: { ...process.env, ...Object.fromEntries(Object.entries(env).map(([k, v]) => [k, String(v)])) },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  const markers = new Map<string, () => void>();
  child.stdout!.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
    for (const [marker, resolve] of markers) if (stdout.split('\n').includes(marker)) resolve();
  });
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  if (STDERR_DIR)
    child.stderr!.pipe(createWriteStream(join(STDERR_DIR, `${basename(script, '.ts')}-${child.pid}.log`)));
  const result = new Promise<unknown>((resolve, reject) => {
    // 'close', not 'exit': at 'exit' the last of the worker's stdout may not have been read yet.
    child.on('close', (code, signal) => {
      if (code !== 0) return reject(new Error(`worker ${file} exited with ${code ?? signal}: ${stderr.slice(-2000)}`));
      const lines = stdout.trim().split('\n');
      try {
        resolve(JSON.parse(lines[lines.length - 1]));
      } catch {
        reject(new Error(`worker ${file} printed no JSON result: ${stdout.slice(-500)} ${stderr.slice(-1000)}`));
      }
    });
  });
  result.catch(() => undefined); // observed by the caller when it wants to
  return {
    child,
    result,
    describe() {
      const state =
        child.exitCode !== null || child.signalCode !== null
          ? `exited (${child.exitCode ?? child.signalCode})`
          : 'still running';
      return `pid ${child.pid} ${state}; stdout: ${stdout.slice(-300).trim()} | stderr: ${stderr.slice(-500).trim()}`;
    },
    send(line) {
      child.stdin!.write(line + '\n');
    },
    waitFor(marker, timeoutMs = 30_000) {
      if (stdout.split('\n').includes(marker)) return Promise.resolve();
      return new Promise<void>((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`worker ${file} did not print "${marker}": ${stderr.slice(-1000)}`)),
          timeoutMs,
        );
        markers.set(marker, () => {
          clearTimeout(timer);
          resolve();
        });
        child.on('exit', () => reject(new Error(`worker ${file} exited before "${marker}": ${stderr.slice(-1000)}`)));
      });
    },
  };
}

/** Kills every still-running worker (afterEach/afterAll safety net). */
export function killAll(workers: Worker[]): void {
  for (const w of workers) if (w.child.exitCode === null && w.child.signalCode === null) w.child.kill('SIGKILL');
}

/**
 * Starts a race of workers started with START_AT 'signal' (see raceStart in test/workers/worker-client.ts):
 * once every one of them is ready (connected), tells them all to go. Resolves with the time it did.
 */
export async function startTogether(workers: Worker[], timeoutMs = 60_000): Promise<number> {
  await Promise.all(workers.map((w) => w.waitFor('ready', timeoutMs)));
  for (const w of workers) w.send('go');
  return Date.now();
}

/**
 * Runs `count` racy-counter workers (test/workers/racy-counter.ts) with `env` and waits for them (they
 * start together, see startTogether, unless `env` sets START_AT);
 * they are added to `registry` so the caller's afterEach can kill them if the test fails.
 */
export async function raceCounter(
  count: number,
  env: Record<string, string | number>,
  registry: Worker[],
): Promise<{ increments: number[]; total: number }> {
  const procs = Array.from({ length: count }, () => startWorker('racy-counter.ts', { START_AT: 'signal', ...env }));
  registry.push(...procs);
  if (env.START_AT === undefined) await startTogether(procs);
  // A worker that never ends would otherwise show up as a bare test timeout: say which and where.
  const limitMs = Math.max(0, Number(env.START_AT ?? 0) - Date.now()) + Number(env.DURATION_MS) + 30_000;
  let timer: NodeJS.Timeout | undefined;
  const overdue = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        reject(
          new Error(
            `racy-counter workers still running after ${limitMs} ms:\n${procs.map((w) => w.describe()).join('\n')}`,
          ),
        ),
      limitMs,
    );
  });
  const results = await Promise.race([Promise.all(procs.map((w) => w.result)), overdue]).finally(() =>
    clearTimeout(timer),
  );
  const increments = (results as { increments: number }[]).map((r) => r.increments);
  return { increments, total: increments.reduce((sum, n) => sum + n, 0) };
}
