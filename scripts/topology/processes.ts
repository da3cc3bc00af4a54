/**
 * Process-level helpers for the Redis test topologies: finding the binaries, starting a daemonized
 * redis-server, and checking / signalling the exact pids we recorded (never processes found by name).
 */
import { execFileSync, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import { sleep } from '../tooling';

export const REDIS_NOT_FOUND =
  'redis-server not found: run "npm run setup" (installs the Debian packages redis-server and redis-tools) or install Redis >= 7 yourself';

/** A process we started, as recorded in the state dir. */
export interface RecordedProcess {
  pid: number;
  port: number;
  /** The node's own dir: redis-server chdir()s into its `dir`, which is how we recognise it later. */
  dir: string;
}

let redisChecked = false;

/** Fail once, early, with the fix, instead of a bare ENOENT from the first spawn. */
export function assertRedisInstalled(): void {
  if (redisChecked) return;
  if (!onPath('redis-server')) throw new Error(REDIS_NOT_FOUND);
  if (!onPath('redis-cli')) throw new Error(REDIS_NOT_FOUND.replace('redis-server not found', 'redis-cli not found'));
  const version = execFileSync('redis-server', ['--version'], { encoding: 'utf8' });
  const major = Number(/v=(\d+)\./.exec(version)?.[1]);
  if (!(major >= 7)) {
    throw new Error(`${REDIS_NOT_FOUND.replace('not found', 'is too old')} (found: ${version.trim()})`);
  }
  redisChecked = true;
}

function onPath(command: string): boolean {
  return (process.env.PATH ?? '').split(path.delimiter).some((dir) => {
    try {
      fs.accessSync(path.join(dir, command), fs.constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}

const HAVE_PROC = fs.existsSync('/proc/self/stat');

/**
 * Alive = exists and is not a zombie. Daemonized redis-servers are reparented to pid 1, which in
 * containers often never reaps them, so a killed node can linger as a zombie forever.
 */
export function isAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  if (!HAVE_PROC) {
    try {
      process.kill(pid, 0);
      return true;
    } catch (err) {
      return (err as NodeJS.ErrnoException).code === 'EPERM';
    }
  }
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.charAt(stat.lastIndexOf(')') + 2);
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}

/**
 * Pid-reuse safety: only treat `pid` as ours if it is still a redis-server running in the node's
 * own dir (Linux: /proc/<pid>/cwd; elsewhere the process title must name our port).
 */
export function isOurRedis(proc: RecordedProcess): boolean {
  if (!isAlive(proc.pid)) return false;
  try {
    if (!HAVE_PROC) {
      const command = execFileSync('ps', ['-o', 'command=', '-p', String(proc.pid)], { encoding: 'utf8' });
      return command.includes('redis-server') && command.includes(`:${proc.port}`);
    }
    const cmdline = fs.readFileSync(`/proc/${proc.pid}/cmdline`, 'utf8');
    const cwd = fs.readlinkSync(`/proc/${proc.pid}/cwd`);
    return cmdline.includes('redis-server') && cwd === realDir(proc.dir);
  } catch {
    return false; // exited meanwhile, or not ours to inspect
  }
}

function realDir(dir: string): string {
  try {
    return fs.realpathSync(dir);
  } catch {
    return path.resolve(dir);
  }
}

/** The process that started a topology (a jest run, the redis CLI) still runs: a node process with that pid. */
export function isLiveNodeProcess(pid: number): boolean {
  if (!isAlive(pid)) return false;
  if (!HAVE_PROC) return true;
  try {
    return /(^|\/)node\b/.test(fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')[0]);
  } catch {
    return false;
  }
}

export function sendSignal(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
  }
}

export async function waitForExit(pids: number[], timeoutMs: number): Promise<number[]> {
  const deadline = Date.now() + timeoutMs;
  let alive = pids.filter(isAlive);
  while (alive.length > 0 && Date.now() < deadline) {
    await sleep(50);
    alive = alive.filter(isAlive);
  }
  return alive;
}

/**
 * SIGTERM (plus SIGCONT, so a SIGSTOPped node can act on it), wait, then SIGKILL whatever is left.
 * Processes that are gone or no longer ours are skipped. Resolves once every one of them is gone.
 */
export async function terminateProcesses(procs: RecordedProcess[], graceMs = 5000): Promise<void> {
  const ours = procs.filter(isOurRedis).map((p) => p.pid);
  for (const pid of ours) {
    sendSignal(pid, 'SIGTERM');
    sendSignal(pid, 'SIGCONT');
  }
  const stubborn = await waitForExit(ours, graceMs);
  for (const pid of stubborn) sendSignal(pid, 'SIGKILL');
  const left = await waitForExit(stubborn, 3000);
  if (left.length > 0) throw new Error(`redis-server pids ${left.join(', ')} survived SIGKILL`);
}

/** Fire-and-forget variant for `process.on('exit')` handlers, where nothing async may run. */
export function terminateProcessesSync(procs: RecordedProcess[]): void {
  for (const proc of procs.filter(isOurRedis)) {
    sendSignal(proc.pid, 'SIGTERM');
    sendSignal(proc.pid, 'SIGCONT');
  }
}

/**
 * Run `redis-server <args>` with `daemonize yes` and return the daemon's pid from its pid file.
 * The launcher exits right after forking; the daemon writes the pid file once it listens.
 */
export async function startDaemon(args: string[], files: { pidFile: string; logFile: string }): Promise<number> {
  fs.rmSync(files.pidFile, { force: true }); // a SIGKILLed node leaves a stale one behind
  // Deliberately not abortable: once launched we wait for the pid so a daemon never goes unrecorded.
  const launcher = await run('redis-server', args, { timeoutMs: 10_000 });
  if (launcher.code !== 0) {
    throw new Error(
      `redis-server ${args.join(' ')} exited with code ${launcher.code}: ${launcher.output.trim()}${logTail(files.logFile)}`,
    );
  }
  const deadline = Date.now() + 10_000;
  for (;;) {
    const pid = readPidFile(files.pidFile);
    if (pid !== undefined) return pid;
    if (Date.now() > deadline) {
      throw new Error(
        `redis-server ${args.join(' ')} wrote no pid file ${files.pidFile} within 10s${logTail(files.logFile)}`,
      );
    }
    await sleep(25);
  }
}

export function readPidFile(file: string): number | undefined {
  try {
    const pid = Number(fs.readFileSync(file, 'utf8').trim());
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Spawn and wait for exit, collecting output. `detached` puts the child in its own process group so
 * a terminal Ctrl-C does not kill it halfway (e.g. mid-daemonize); our own abort handling stops it.
 */
export function run(
  command: string,
  args: string[],
  opts: { timeoutMs: number; signal?: AbortSignal },
): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const kill = (): void => {
      if (child.pid !== undefined) sendSignal(child.pid, 'SIGKILL');
    };
    const timer = setTimeout(kill, opts.timeoutMs);
    opts.signal?.addEventListener('abort', kill, { once: true });
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on('close', (code, sig) => {
      clearTimeout(timer);
      opts.signal?.removeEventListener('abort', kill);
      if (sig !== null)
        output += `\n(killed by ${sig}${opts.signal?.aborted ? ', aborted' : `, timeout ${opts.timeoutMs}ms`})`;
      resolve({ code, output });
    });
  });
}

/** True if nothing listens on 127.0.0.1:port (a 0.0.0.0 or dual-stack [::] listener also counts). */
export function isPortFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen({ host: '127.0.0.1', port, exclusive: true }, () => server.close(() => resolve(true)));
  });
}

export function logTail(file: string, lines = 20): string {
  try {
    const tail = fs.readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
    return `\n--- last ${lines} lines of ${file} ---\n${tail}`;
  } catch {
    return `\n(no log at ${file})`;
  }
}
