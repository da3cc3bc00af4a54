/**
 * Helpers of the compatibility suite: pack the library as npm would publish it, install and compile an
 * example app the way a user would, start it as its own OS process, and talk to it over HTTP.
 * Every process started here is tracked by pid and only those are ever signalled.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { cpSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { recordApps } from './app-pids';

export const REPO_ROOT = join(__dirname, '..', '..');
const TSC = require.resolve('typescript/bin/tsc');

/** Output kept per command or process (the tail is what a failure message shows). */
const OUTPUT_LIMIT = 200_000;

/** Runs a command to completion; rejects with its exit status and the tail of its output. */
export function run(
  command: string,
  args: string[],
  options: { cwd: string; env?: NodeJS.ProcessEnv; timeoutMs?: number },
): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      command,
      args,
      { cwd: options.cwd, env: options.env ?? process.env, timeout: options.timeoutMs ?? 240_000, maxBuffer: 64 << 20 },
      (error, stdout, stderr) => {
        const output = `${stdout}${stderr}`;
        if (!error) return resolve(output);
        const how = error.killed ? `killed by ${error.signal ?? 'timeout'}` : `exit ${String(error.code)}`;
        reject(new Error(`\`${command} ${args.join(' ')}\` failed (${how}) in ${options.cwd}:\n${tail(output)}`));
      },
    );
  });
}

export function tail(text: string, lines = 60): string {
  return text.split('\n').slice(-lines).join('\n');
}

/**
 * Builds lib/ into a fresh directory and packs it with `npm pack`, with the repository's package.json
 * (so its `files` decide what ships), lua/ and the lock board's page script and stylesheet
 * (lib/board/web/, shipped as they are). Returns the tarball's path. The repository's own dist/
 * is left alone, and no stale output of a deleted source can slip into the package.
 */
export async function packLibrary(workDir: string): Promise<string> {
  const stage = join(workDir, 'package');
  await run(process.execPath, [TSC, '-p', 'tsconfig.build.json', '--outDir', join(stage, 'dist')], {
    cwd: REPO_ROOT,
  });
  cpSync(join(REPO_ROOT, 'lua'), join(stage, 'lua'), { recursive: true });
  const web = join('lib', 'board', 'web');
  cpSync(join(REPO_ROOT, web), join(stage, web), { recursive: true });
  for (const file of readdirSync(REPO_ROOT)) {
    if (file === 'package.json' || /^(readme|license|licence|changelog)/i.test(file)) {
      cpSync(join(REPO_ROOT, file), join(stage, file));
    }
  }
  const packed = await run('npm', ['pack', '--json', '--pack-destination', workDir], { cwd: stage, env: npmEnv() });
  const [{ filename }] = JSON.parse(packed.slice(packed.indexOf('['), packed.lastIndexOf(']') + 1)) as {
    filename: string;
  }[];
  return join(workDir, filename);
}

/**
 * npm's environment: whatever the user's npmrc says, peer dependency conflicts must fail the install
 * (no legacy-peer-deps, no force), as they would for a user without flags.
 */
export function npmEnv(): NodeJS.ProcessEnv {
  return {
    ...process.env,
    npm_config_legacy_peer_deps: 'false',
    npm_config_force: 'false',
    npm_config_update_notifier: 'false',
  };
}

export interface InstalledApp {
  dir: string;
  /** What `npm install` printed (warnings included). */
  installOutput: string;
  /** Wall time of `npm install` and of tsc, in ms. */
  installMs: number;
  compileMs: number;
}

/**
 * Sets up one variant in `dir` as a user would: its package.json and tsconfig.json, the shared sources
 * of test/compat/app/src, `npm install <tarball>` (no flags), then tsc (the repository's TypeScript).
 */
export async function installApp(variant: string, dir: string, tarball: string): Promise<InstalledApp> {
  const here = __dirname;
  mkdirSync(dir, { recursive: true });
  cpSync(join(here, 'app', 'src'), join(dir, 'src'), { recursive: true });
  for (const file of ['package.json', 'tsconfig.json']) cpSync(join(here, 'variants', variant, file), join(dir, file));
  const started = Date.now();
  const installOutput = await run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', tarball], {
    cwd: dir,
    env: npmEnv(),
  });
  const installed = Date.now();
  await run(process.execPath, [TSC, '-p', 'tsconfig.json'], { cwd: dir });
  return { dir, installOutput, installMs: installed - started, compileMs: Date.now() - installed };
}

/** The version of a package as installed in `dir`, or undefined if it is not there. */
export function installedVersion(dir: string, name: string): string | undefined {
  try {
    return (JSON.parse(readFileSync(join(dir, 'node_modules', name, 'package.json'), 'utf8')) as { version: string })
      .version;
  } catch {
    return undefined;
  }
}

export interface RunningApp {
  url: string;
  pid: number;
  output(): string;
  stop(): Promise<void>;
}

/** Running app processes and their dirs, also recorded for global-setup.ts's exit handler (app-pids.ts). */
const started = new Map<ChildProcess, string>();

function track(child: ChildProcess, dir?: string): void {
  if (dir === undefined) started.delete(child);
  else started.set(child, dir);
  recordApps([...started].map(([app, cwd]) => ({ pid: app.pid!, dir: cwd })));
}

/** Starts `node dist/main.js` in `dir` on a free port and resolves once it listens. */
export function startApp(dir: string, env: NodeJS.ProcessEnv, timeoutMs = 30_000): Promise<RunningApp> {
  const child = spawn(process.execPath, ['dist/main.js'], {
    cwd: dir,
    env: { ...process.env, ...env, PORT: '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  track(child, dir);
  let output = '';
  const append = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-OUTPUT_LIMIT);
  };
  child.stdout!.on('data', append);
  child.stderr!.on('data', append);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  void exited.then(() => track(child));

  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
    await exited;
    clearTimeout(timer);
  };

  return new Promise<RunningApp>((resolve, reject) => {
    const fail = (why: string) => {
      clearTimeout(timer);
      child.stdout!.off('data', onData);
      child.off('exit', onEarlyExit);
      void stop().then(() => reject(new Error(`the app in ${dir} ${why}:\n${tail(output)}`)));
    };
    const timer = setTimeout(() => fail(`did not listen within ${timeoutMs / 1000}s`), timeoutMs);
    const onData = () => {
      const url = /listening on (http:\/\/\S+)/.exec(output)?.[1];
      if (!url) return;
      clearTimeout(timer);
      child.stdout!.off('data', onData);
      child.off('exit', onEarlyExit);
      resolve({ url, pid: child.pid!, output: () => output, stop });
    };
    const onEarlyExit = (code: number | null, signal: string | null) => fail(`exited (${signal ?? code})`);
    child.stdout!.on('data', onData);
    child.once('exit', onEarlyExit);
  });
}

export interface Reply<T = unknown> {
  status: number;
  body: T;
  retryAfter: string | null;
}

export async function call<T = unknown>(method: 'GET' | 'POST', url: string): Promise<Reply<T>> {
  const response = await fetch(url, { method });
  const text = await response.text();
  const json = (response.headers.get('content-type') ?? '').includes('application/json');
  return {
    status: response.status,
    body: (json ? JSON.parse(text) : text) as T,
    retryAfter: response.headers.get('retry-after'),
  };
}
