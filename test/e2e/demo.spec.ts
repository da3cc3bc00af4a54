/**
 * `npm run demo` end to end, smaller: the demo script (spawned as its own process, `--json`) runs the
 * page-view experiment on each of the four deployments, against the shared test topologies that
 * test/global-setup.ts started (RedLock's masters: the shared `multi` topology). Two sample-app
 * instances and the load balancer are started and stopped by the script; the test checks that v3, v4
 * and v5 counted every request and that no app process outlives the run.
 *
 * App ports: 3110-3112 (single), 3120-3122 (master-slave), 3130-3132 (sentinel), 3140-3142 (cluster).
 */
import { spawn } from 'node:child_process';
import * as http from 'node:http';
import * as path from 'node:path';
import { parseArgs, UsageError } from '../../scripts/demo/args';
import { startProxy, type RunningProxy } from '../../scripts/demo/proxy';
import { buildRow, formatTable, percentile, verdict } from '../../scripts/demo/report';
import { isPidAlive } from '../../scripts/redis-topology';
import { sharedTopology } from '../support/topologies';
import { formatHostPort, type HostPort } from '../../scripts/tooling';

const ROOT = path.resolve(__dirname, '..', '..');
const REQUESTS = 120;
const CONCURRENCY = 60;
const DEMO_TIMEOUT_MS = 80_000;

type Deployment = 'single' | 'master-slave' | 'sentinel' | 'cluster';

interface DemoRow {
  version: string;
  expected: number;
  counted: number;
  lost: number;
  errors: number;
  exact: boolean;
  wallMs: number;
  p50Ms: number;
  p99Ms: number;
  errorSamples: string[];
}

interface DemoResult {
  ok: boolean;
  error?: string;
  deployment: Deployment;
  redis: { origin: string };
  redlock: { origin: string } | null;
  apps: { port: number; pid: number }[];
  rows: DemoRow[];
}

interface DemoRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** Every sample-app pid the script reported starting (its stderr), also when it failed. */
  appPids: number[];
}

const list = (addresses: HostPort[]): string => addresses.map(formatHostPort).join(',');

/** The lock-env variables (lib/connection/env.ts) pointing at the shared topology of a deployment. */
function redisEnv(deployment: Deployment): Record<string, string> {
  const redlock = { REDLOCK_NODES: list(sharedTopology('multi').masters) };
  switch (deployment) {
    case 'single': {
      const [master] = sharedTopology('single').masters;
      return { ...redlock, REDIS_DEPLOY_TYPE: deployment, REDIS_URL: `redis://${master.host}:${master.port}` };
    }
    case 'master-slave': {
      const t = sharedTopology('replica');
      const [master] = t.masters;
      return {
        ...redlock,
        REDIS_DEPLOY_TYPE: deployment,
        REDIS_URL: `redis://${master.host}:${master.port}`,
        REDIS_REPLICAS: list(t.replicas),
      };
    }
    case 'sentinel': {
      const t = sharedTopology('sentinel');
      return {
        ...redlock,
        REDIS_DEPLOY_TYPE: deployment,
        REDIS_SENTINELS: list(t.sentinels),
        REDIS_SENTINEL_MASTER: t.sentinelMasterName!,
      };
    }
    case 'cluster':
      return { ...redlock, REDIS_DEPLOY_TYPE: deployment, REDIS_NODES: list(sharedTopology('cluster').masters) };
  }
}

/** Runs scripts/demo.ts; SIGTERM after DEMO_TIMEOUT_MS (it then stops what it started), SIGKILL 10 s later. */
function runDemo(args: string[], env: Record<string, string>): Promise<DemoRun> {
  const baseEnv = Object.fromEntries(
    Object.entries(process.env).filter(([name]) => !/^REDIS_(?!TOPOLOGY_RUN_ID)|^REDLOCK_/.test(name)),
  );
  const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/demo.ts', ...args], {
    cwd: ROOT,
    env: { ...baseEnv, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const run: DemoRun = { code: null, signal: null, stdout: '', stderr: '', appPids: [] };
  child.stdout.on('data', (chunk: Buffer) => (run.stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => {
    run.stderr += chunk.toString();
    for (const m of run.stderr.matchAll(/sample-app pid (\d+) on port/g)) {
      const pid = Number(m[1]);
      if (!run.appPids.includes(pid)) run.appPids.push(pid);
    }
  });
  const term = setTimeout(() => child.kill('SIGTERM'), DEMO_TIMEOUT_MS);
  const kill = setTimeout(() => child.kill('SIGKILL'), DEMO_TIMEOUT_MS + 10_000);
  return new Promise((resolve) => {
    child.on('close', (code, signal) => {
      clearTimeout(term);
      clearTimeout(kill);
      run.code = code;
      run.signal = signal;
      resolve(run);
    });
  });
}

/** SIGKILLs whatever app pid is still alive; returns those pids. */
function killSurvivors(pids: number[]): number[] {
  const survivors = pids.filter(isPidAlive);
  for (const pid of survivors) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone meanwhile
    }
  }
  return survivors;
}

async function waitGone(pids: number[], ms: number): Promise<number[]> {
  const deadline = Date.now() + ms;
  while (pids.some(isPidAlive) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  return pids.filter(isPidAlive);
}

describe.each<[Deployment, number]>([
  ['single', 3110],
  ['master-slave', 3120],
  ['sentinel', 3130],
  ['cluster', 3140],
])('npm run demo on %s Redis', (deployment, basePort) => {
  let run: DemoRun | undefined;

  afterEach(() => {
    // Even when an assertion failed: no sample-app may survive the test.
    if (run) killSurvivors(run.appPids);
  });

  it(
    `counts all ${REQUESTS} requests with v3, v4 and v5 and leaves nothing running`,
    async () => {
      run = await runDemo(
        [
          '--json',
          `--requests=${REQUESTS}`,
          `--concurrency=${CONCURRENCY}`,
          '--versions=v1,v2,v3,v4,v5',
          `--port=${basePort}`,
          `--app-ports=${basePort + 1},${basePort + 2}`,
        ],
        redisEnv(deployment),
      );
      const context = `exit ${run.code ?? run.signal}\n--- stderr ---\n${run.stderr}\n--- stdout ---\n${run.stdout}`;

      let result: DemoResult;
      try {
        result = JSON.parse(run.stdout) as DemoResult;
      } catch {
        throw new Error(`the demo printed no JSON result (${context})`);
      }
      process.stderr.write(
        `\ndemo on ${deployment}: ` +
          result.rows
            .map((r) => `${r.version} ${r.counted}/${r.expected}${r.errors ? ` (${r.errors} failed)` : ''}`)
            .join(', ') +
          '\n',
      );

      // The shared topologies answer, so the script must not have started any Redis of its own.
      expect({ error: result.error, redis: result.redis?.origin, redlock: result.redlock?.origin }).toEqual({
        error: undefined,
        redis: 'configured',
        redlock: 'configured',
      });
      expect(result.apps.map((a) => a.pid).sort()).toEqual([...run.appPids].sort());
      expect(result.rows.map((r) => r.version)).toEqual(['v1', 'v2', 'v3', 'v4', 'v5']);
      for (const row of result.rows) {
        expect(row.expected).toBe(REQUESTS);
        // v1 and v2 may or may not lose updates at this size: reported above, not asserted.
        if (['v3', 'v4', 'v5'].includes(row.version)) {
          expect({ version: row.version, counted: row.counted, errors: row.errors, samples: row.errorSamples }).toEqual(
            { version: row.version, counted: REQUESTS, errors: 0, samples: [] },
          );
        }
      }
      expect(result.ok).toBe(true);
      expect({ code: run.code, signal: run.signal }).toEqual({ code: 0, signal: null });

      // It stops its apps before exiting: give a zombie-reaping moment, then none may be alive.
      expect(await waitGone(run.appPids, 2000)).toEqual([]);
    },
    DEMO_TIMEOUT_MS + 15_000,
  );
});

describe('demo pieces', () => {
  it('parses the command line', () => {
    expect(parseArgs([])).toMatchObject({ requests: 666, concurrency: 666, versions: ['v1', 'v2', 'v3', 'v4', 'v5'] });
    expect(parseArgs([]).board).toBe(false);
    expect(parseArgs(['--board']).board).toBe(true);
    expect(
      parseArgs([
        '--requests',
        '10',
        '--concurrency=5',
        '--versions',
        'v5,3,v3',
        '--json',
        '--keep',
        '--app-ports=1,2',
      ]),
    ).toMatchObject({ requests: 10, concurrency: 5, versions: ['v3', 'v5'], json: true, keep: true, appPorts: [1, 2] });
    for (const bad of [
      ['--requests', '0'],
      ['--versions', 'v6'],
      ['--json=1'],
      ['--board=1'],
      ['--nope'],
      ['--app-ports', '3,3'],
    ]) {
      expect(() => parseArgs(bad)).toThrow(UsageError);
    }
  });

  it('computes rows, the verdict and the table', () => {
    const load = (ok: number, errors: number) => ({
      requests: ok + errors,
      ok,
      errors,
      errorSamples: errors ? [`${errors}x HTTP 409`] : [],
      wallMs: 1234.5,
      latenciesMs: [1, 2, 3, 4, 100],
      perUpstream: { '127.0.0.1:3101': 3, '127.0.0.1:3102': 2 },
    });
    expect(percentile([1, 2, 3, 4, 100], 50)).toBe(3);
    expect(percentile([1, 2, 3, 4, 100], 99)).toBe(100);
    const v1 = buildRow('v1', load(5, 0), 2);
    const v3 = buildRow('v3', load(5, 0), 5);
    expect(v1).toMatchObject({ lost: 3, exact: false, mustBeExact: false, p50Ms: 3 });
    expect(verdict([v1, v3])).toEqual({ ok: true, failures: [] });
    const v4 = buildRow('v4', load(4, 1), 4);
    expect(verdict([v1, v3, v4]).failures).toEqual(['v4 counted 4 of 5 requests (1 failed: 1x HTTP 409)']);
    const table = formatTable([v1, v3]);
    expect(table.split('\n')[0]).toMatch(/^version\s+expected\s+counted\s+lost\s+errors\s+wall\s+p50\s+p99\s+per app$/);
    expect(table).toMatch(/^v1\s+5\s+2\s+3\s+0\s+1\.23 s\s+3\.0 ms\s+100 ms\s+3 \/ 2$/m);
    expect(table).toContain('OK: v3 counted every request.');
  });

  describe('built-in proxy', () => {
    const servers: http.Server[] = [];
    let proxy: RunningProxy | undefined;

    afterEach(async () => {
      await proxy?.close();
      for (const s of servers.splice(0)) {
        s.closeAllConnections();
        await new Promise((resolve) => s.close(resolve));
      }
    });

    async function upstream(): Promise<number> {
      const server = http.createServer((req, res) => {
        let body = '';
        req.on('data', (chunk: Buffer) => (body += chunk.toString()));
        req.on('end', () => res.end(JSON.stringify({ port: (server.address() as { port: number }).port, body })));
      });
      servers.push(server);
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      return (server.address() as { port: number }).port;
    }

    function call(port: number, method = 'GET', body?: string): Promise<{ status?: number; body: string }> {
      return new Promise((resolve, reject) => {
        const req = http.request({ host: '127.0.0.1', port, method, path: '/x', agent: false }, (res) => {
          let text = '';
          res.on('data', (chunk: Buffer) => (text += chunk.toString()));
          res.on('end', () => resolve({ status: res.statusCode, body: text }));
        });
        req.on('error', reject);
        req.end(body);
      });
    }

    it('spreads requests round-robin, streams bodies and answers 502 for a dead upstream', async () => {
      const [a, b] = [await upstream(), await upstream()];
      proxy = await startProxy({ port: 0, upstreams: [a, b].map((port) => ({ host: '127.0.0.1', port })) });
      const ports = [];
      for (let i = 0; i < 4; i++) ports.push((JSON.parse((await call(proxy.port)).body) as { port: number }).port);
      expect(ports).toEqual([a, b, a, b]);
      expect(JSON.parse((await call(proxy.port, 'POST', 'hello')).body)).toEqual({ port: a, body: 'hello' });

      const dead = servers.pop()!;
      dead.closeAllConnections();
      await new Promise((resolve) => dead.close(resolve));
      const answers = [await call(proxy.port), await call(proxy.port)].map((r) => r.status).sort();
      expect(answers).toEqual([200, 502]);
    });
  });
});
