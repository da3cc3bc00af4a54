/**
 * The round-robin load balancer in front of the two app instances, as in the seed: nginx when it is
 * installed (run in the foreground as our child, with a config in a temp dir), else the built-in
 * proxy (./proxy.ts).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import type { BalancerChoice } from './args';
import { Cleanup } from './cleanup';
import { startProxy, type Upstream } from './proxy';

export interface Balancer {
  kind: 'nginx' | 'builtin';
  url: string;
  port: number;
  /** nginx's master pid. */
  pid?: number;
  /** What was chosen and why, for the log. */
  description: string;
}

export interface StartBalancerOptions {
  choice: BalancerChoice;
  port: number;
  upstreams: Upstream[];
  cleanup: Cleanup;
  log: (line: string) => void;
  signal: AbortSignal;
}

export async function startBalancer(opts: StartBalancerOptions): Promise<Balancer> {
  const nginx = opts.choice === 'builtin' ? undefined : findOnPath('nginx');
  if (opts.choice === 'nginx' && !nginx) throw new Error('--balancer nginx: nginx is not on PATH');
  const targets = opts.upstreams.map((u) => `${u.host}:${u.port}`).join(', ');
  if (nginx) {
    const pid = await startNginx(nginx, opts);
    return {
      kind: 'nginx',
      port: opts.port,
      url: `http://127.0.0.1:${opts.port}`,
      pid,
      description: `nginx (${nginx}, pid ${pid}) at http://127.0.0.1:${opts.port}, round-robin to ${targets}`,
    };
  }
  const proxy = await startProxy({ upstreams: opts.upstreams, port: opts.port });
  opts.cleanup.add('built-in proxy', () => proxy.close());
  const why = opts.choice === 'builtin' ? '--balancer builtin' : 'nginx is not on PATH';
  return {
    kind: 'builtin',
    port: proxy.port,
    url: `http://127.0.0.1:${proxy.port}`,
    description: `built-in round-robin proxy (${why}) at http://127.0.0.1:${proxy.port}, to ${targets}`,
  };
}

export function findOnPath(command: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    if (!dir) continue;
    const file = path.join(dir, command);
    try {
      fs.accessSync(file, fs.constants.X_OK);
      return file;
    } catch {
      // next
    }
  }
  return undefined;
}

/** The nginx config: one upstream of the apps, round-robin (nginx's default), keep-alive, no retries. */
export function nginxConfig(port: number, upstreams: Upstream[]): string {
  return `# Written by scripts/demo.ts; nginx runs as the demo's child with -p <this dir>.
daemon off;
master_process on;
worker_processes 1;
worker_rlimit_nofile 16384;
pid nginx.pid;
error_log stderr warn;

events {
  worker_connections 8192;
}

http {
  access_log off;
  client_body_temp_path tmp/client_body;
  proxy_temp_path tmp/proxy;
  fastcgi_temp_path tmp/fastcgi;
  uwsgi_temp_path tmp/uwsgi;
  scgi_temp_path tmp/scgi;

  upstream pview_apps {
${upstreams.map((u) => `    server ${u.host}:${u.port};`).join('\n')}
    keepalive 256;
    # Below Node's 5 s server keep-alive timeout, so nginx never reuses a connection the app is closing.
    keepalive_timeout 4s;
  }

  server {
    listen 127.0.0.1:${port};

    location / {
      proxy_pass http://pview_apps;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      # GET /vN/pview counts a view: never send a request to the other instance a second time.
      proxy_next_upstream off;
      add_header X-Upstream $upstream_addr always;
    }
  }
}
`;
}

/** nginx >= 1.19.5 takes -e, so it never touches its compiled-in error log path. */
function supportsErrorLogFlag(nginx: string): boolean {
  const result = spawnSync(nginx, ['-v'], { encoding: 'utf8' }); // prints to stderr
  const m = /nginx\/(\d+)\.(\d+)\.(\d+)/.exec(`${result.stdout}${result.stderr}`);
  if (!m) return false;
  const [major, minor, patch] = [Number(m[1]), Number(m[2]), Number(m[3])];
  return major > 1 || (major === 1 && (minor > 19 || (minor === 19 && patch >= 5)));
}

async function startNginx(nginx: string, opts: StartBalancerOptions): Promise<number> {
  const prefix = fs.mkdtempSync(path.join(os.tmpdir(), 'nestjs-redis-lock-demo-nginx-'));
  // Started as root, nginx's workers run as nobody and must be able to enter the prefix.
  fs.chmodSync(prefix, 0o755);
  fs.mkdirSync(path.join(prefix, 'tmp'));
  const conf = path.join(prefix, 'nginx.conf');
  fs.writeFileSync(conf, nginxConfig(opts.port, opts.upstreams));
  const args = ['-p', prefix + path.sep, '-c', conf];
  if (supportsErrorLogFlag(nginx)) args.push('-e', 'stderr');

  const child = spawn(nginx, args, { detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  const output: string[] = [];
  for (const stream of [child.stdout!, child.stderr!]) {
    stream.setEncoding('utf8');
    stream.on('data', (chunk: string) => {
      output.push(...chunk.trimEnd().split('\n'));
      output.splice(0, Math.max(0, output.length - 40));
    });
  }
  const exited = new Promise<void>((resolve) => child.once('close', () => resolve()));
  const running = (): boolean => child.exitCode === null && child.signalCode === null;
  const tail = (): string => (output.length > 0 ? `\n--- nginx output ---\n${output.join('\n')}` : '');

  opts.cleanup.add(
    'nginx',
    async () => {
      await stopChild(child, exited, running);
      fs.rmSync(prefix, { recursive: true, force: true });
      opts.log(`stopped nginx (pid ${child.pid})`);
    },
    { stopSync: () => running() && signal(child, 'SIGTERM') },
  );
  if (child.pid === undefined) {
    const err = await new Promise<Error>((resolve) => child.once('error', resolve));
    throw new Error(`could not start nginx: ${err.message}`);
  }

  // Ready when a request through it reaches an app.
  const deadline = Date.now() + 10_000;
  for (;;) {
    opts.signal.throwIfAborted();
    if (!running()) throw new Error(`nginx exited with ${child.exitCode ?? child.signalCode}${tail()}`);
    if ((await probe(opts.port)) === 200) return child.pid;
    if (Date.now() > deadline) throw new Error(`nginx did not answer on port ${opts.port} within 10s${tail()}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

function probe(port: number): Promise<number | undefined> {
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port, path: '/health', agent: false, timeout: 1000 }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode));
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(undefined));
  });
}

function signal(child: ChildProcess, sig: NodeJS.Signals): void {
  try {
    if (child.pid !== undefined) process.kill(child.pid, sig);
  } catch {
    // gone already
  }
}

/** SIGTERM (nginx's fast shutdown), SIGKILL after 5 s. */
async function stopChild(child: ChildProcess, exited: Promise<void>, running: () => boolean): Promise<void> {
  if (child.pid === undefined || !running()) return;
  signal(child, 'SIGTERM');
  const timer = setTimeout(() => running() && signal(child, 'SIGKILL'), 5000);
  await exited;
  clearTimeout(timer);
}
