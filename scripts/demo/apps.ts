/**
 * The sample-app instances: `node --import tsx sample-app/src/main.ts` with PORT and the Redis env,
 * ready once GET /health answers 200 {"status":"ok"}; stopped by pid, SIGTERM then SIGKILL.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import * as http from 'node:http';
import * as path from 'node:path';
import { isPortFree } from '../redis-topology';
import { Cleanup } from './cleanup';

export const APP_ENTRY = path.join('sample-app', 'src', 'main.ts');

export interface AppInstance {
  port: number;
  pid: number;
  child: ChildProcess;
  /** The last lines the instance printed (stdout and stderr), for error messages. */
  output: string[];
  exited: Promise<void>;
}

export interface StartAppOptions {
  root: string;
  port: number;
  env: Record<string, string | undefined>;
  cleanup: Cleanup;
  log: (line: string) => void;
  verbose: boolean;
  signal: AbortSignal;
  readyTimeoutMs?: number;
  stopGraceMs?: number;
}

const OUTPUT_LINES = 60;

export async function startApp(opts: StartAppOptions): Promise<AppInstance> {
  const started = Date.now();
  const child = spawn(process.execPath, ['--import', 'tsx', APP_ENTRY], {
    cwd: opts.root,
    env: { ...opts.env, PORT: String(opts.port) },
    // Own process group: a terminal Ctrl-C reaches only the demo, which stops the apps in order.
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  if (child.pid === undefined) {
    const err = await new Promise<Error>((resolve) => child.once('error', resolve));
    throw new Error(`could not start ${APP_ENTRY}: ${err.message}`);
  }
  const app: AppInstance = {
    port: opts.port,
    pid: child.pid,
    child,
    output: [],
    exited: new Promise((resolve) => child.once('exit', () => resolve())),
  };
  opts.cleanup.add(`sample-app :${opts.port}`, () => stopApp(app, opts.log, opts.stopGraceMs), {
    group: 'apps',
    stopSync: () => killApp(app, 'SIGKILL'),
  });
  // A machine-readable line: test/e2e/demo.spec.ts collects these pids to check nothing survives.
  opts.log(`app: sample-app pid ${app.pid} on port ${app.port}`);
  collectOutput(app, opts.verbose ? opts.log : undefined);

  await waitHealthy(app, opts.readyTimeoutMs ?? 60_000, opts.signal);
  opts.log(`app: :${app.port} ready in ${((Date.now() - started) / 1000).toFixed(1)}s`);
  return app;
}

function collectOutput(app: AppInstance, echo: ((line: string) => void) | undefined): void {
  for (const stream of [app.child.stdout!, app.child.stderr!]) {
    let partial = '';
    stream.setEncoding('utf8');
    stream.on('data', (chunk: string) => {
      const lines = (partial + chunk).split('\n');
      partial = lines.pop() ?? '';
      for (const raw of lines) {
        // Nest colours its log lines; keep the stored tail plain.
        // eslint-disable-next-line no-control-regex
        const line = raw.replace(/\u001b\[[0-9;]*m/g, '').trimEnd();
        app.output.push(line);
        if (app.output.length > OUTPUT_LINES) app.output.shift();
        echo?.(`  [:${app.port}] ${line}`);
      }
    });
  }
}

const isRunning = (app: AppInstance): boolean => app.child.exitCode === null && app.child.signalCode === null;

function describeExit(app: AppInstance): string {
  return app.child.signalCode ? `was killed by ${app.child.signalCode}` : `exited with code ${app.child.exitCode}`;
}

export function outputTail(app: AppInstance, lines = 25): string {
  const tail = app.output.slice(-lines);
  return tail.length > 0
    ? `\n--- last ${tail.length} lines of sample-app :${app.port} ---\n${tail.join('\n')}`
    : '\n(it printed nothing)';
}

async function waitHealthy(app: AppInstance, timeoutMs: number, signal: AbortSignal): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = 'not probed yet';
  for (;;) {
    signal.throwIfAborted();
    if (!isRunning(app)) {
      throw new Error(
        `sample-app :${app.port} (pid ${app.pid}) ${describeExit(app)} before it was ready${outputTail(app)}`,
      );
    }
    const health = await getHealth(app.port);
    if (health.status === 200) {
      let body: unknown;
      try {
        body = JSON.parse(health.body);
      } catch {
        body = undefined;
      }
      if ((body as { status?: unknown } | undefined)?.status !== 'ok') {
        throw new Error(
          `sample-app :${app.port}: GET /health answered 200 with ${JSON.stringify(health.body)}, ` +
            'expected {"status":"ok"} (see the contract in scripts/demo.ts)',
        );
      }
      return;
    }
    last = health.status === undefined ? health.body : `HTTP ${health.status} ${health.body.slice(0, 200)}`;
    if (Date.now() >= deadline) {
      throw new Error(
        `sample-app :${app.port} (pid ${app.pid}) not healthy after ${timeoutMs / 1000}s (GET /health: ${last})${outputTail(app)}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

function getHealth(port: number): Promise<{ status?: number; body: string }> {
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port, path: '/health', agent: false, timeout: 1000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode, body }));
      res.on('error', (err) => resolve({ body: err.message }));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (err: NodeJS.ErrnoException) => resolve({ body: err.code ?? err.message }));
  });
}

/** SIGTERM, wait up to graceMs for a clean shutdown, then SIGKILL. Resolves once the process is gone. */
export async function stopApp(app: AppInstance, log: (line: string) => void, graceMs = 5000): Promise<void> {
  if (!isRunning(app)) return;
  killApp(app, 'SIGTERM');
  if (await exitedWithin(app, graceMs)) {
    log(`stopped sample-app :${app.port} (pid ${app.pid})`);
    return;
  }
  log(`sample-app :${app.port} (pid ${app.pid}) ignored SIGTERM for ${graceMs / 1000}s: SIGKILL`);
  killApp(app, 'SIGKILL');
  if (!(await exitedWithin(app, 5000))) throw new Error(`sample-app pid ${app.pid} survived SIGKILL`);
}

function killApp(app: AppInstance, signal: NodeJS.Signals): void {
  // Only while we have not seen it exit: after that the pid may belong to someone else.
  if (!isRunning(app)) return;
  try {
    process.kill(app.pid, signal);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
  }
}

async function exitedWithin(app: AppInstance, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  const result = await Promise.race([app.exited.then(() => true as const), timeout]);
  clearTimeout(timer);
  return result;
}

/**
 * Ports for the balancer and the two apps. Explicit ones must be free; each default (3100, 3101,
 * 3102) is replaced by the next free port above it when taken.
 */
export async function choosePorts(
  explicit: { port?: number; appPorts?: [number, number] },
  defaults: [number, number, number] = [3100, 3101, 3102],
): Promise<{ balancer: number; apps: [number, number] }> {
  const wanted: (number | undefined)[] = [explicit.port, ...(explicit.appPorts ?? [undefined, undefined])];
  const chosen: number[] = [];
  const taken = new Set(wanted.filter((p): p is number => p !== undefined));
  for (let i = 0; i < 3; i++) {
    const port = wanted[i];
    if (port !== undefined) {
      if (!(await isPortFree(port))) {
        throw new Error(`port ${port} on 127.0.0.1 is in use (see: ss -ltnp | grep ':${port}\\b'); choose another`);
      }
      chosen.push(port);
      continue;
    }
    let candidate = defaults[i];
    while (taken.has(candidate) || !(await isPortFree(candidate))) {
      candidate++;
      if (candidate > defaults[i] + 500) throw new Error(`no free port in ${defaults[i]}-${candidate}`);
    }
    taken.add(candidate);
    chosen.push(candidate);
  }
  return { balancer: chosen[0], apps: [chosen[1], chosen[2]] };
}
