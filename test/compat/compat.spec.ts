/**
 * Compatibility (#15): the packed library, installed without npm flags into a user's app, works on
 * Nest 11 + ioredis 5 from CommonJS and on Nest 12 + ioredis 6 from an ES module app.
 *
 * For each variant (test/compat/variants/<name>: package.json + tsconfig.json; sources shared in
 * test/compat/app/src): `npm pack` of a fresh build, `npm install <tarball>` into a temp dir, tsc, then
 * two instances of the app (two processes) on one private Redis. Private single Redis on port 7299
 * (7290-7295 are test/faults/cluster-kill.spec.ts's cluster, 7299 is outside its layout).
 * Run alone with `npx jest -c jest.compat.config.js`; `npm test` runs it last.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Redis from 'ioredis';
import { startTopology, stopNode, stopTopology, type RunningTopology } from '../../scripts/redis-topology';
import { documentedPublicApi } from '../support/public-api';
import { recordWorkDir } from './app-pids';
import {
  call,
  installApp,
  installedVersion,
  packLibrary,
  run,
  startApp,
  type InstalledApp,
  type RunningApp,
} from './support';
import { PRIVATE_PORTS } from '../../scripts/test-ports';

const BASE_PORT = PRIVATE_PORTS.compat.base;
const REQUESTS = 40;
const STOCK = 25;

const VARIANTS = [
  { name: 'cjs-nest11', moduleSystem: 'commonjs', resp: 2 },
  { name: 'esm-nest12', moduleSystem: 'esm', resp: 3 },
] as const;

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

/** COMPAT_KEEP=1 keeps the temp dir (installed apps, tarball) for a look after a failure. */
const workDir = mkdtempSync(join(tmpdir(), 'nestjs-redis-lock-compat-'));
if (!process.env.COMPAT_KEEP) recordWorkDir(workDir); // removed also if jest is interrupted
let tarball: string;

beforeAll(async () => {
  const started = Date.now();
  tarball = await packLibrary(workDir);
  process.stderr.write(`test/compat: library built and packed in ${seconds(Date.now() - started)}\n`);
}, 120_000);

afterAll(() => {
  if (process.env.COMPAT_KEEP) {
    process.stderr.write(`test/compat: kept ${workDir}\n`);
  } else {
    rmSync(workDir, { recursive: true, force: true });
    recordWorkDir(undefined);
  }
});

describe.each(VARIANTS)('$name', ({ name, moduleSystem, resp }) => {
  const declared = JSON.parse(readFileSync(join(__dirname, 'variants', name, 'package.json'), 'utf8')) as {
    dependencies: Record<string, string>;
  };
  let app: InstalledApp;
  let topology: RunningTopology | undefined;
  let redis: Redis;
  let a: RunningApp;
  let b: RunningApp;
  const apps: RunningApp[] = [];

  beforeAll(async () => {
    app = await installApp(name, join(workDir, name), tarball);
    const upFrom = Date.now();
    topology = await startTopology('single', { basePort: BASE_PORT, name: `compat-${name}` });
    const port = topology.masters[0].port;
    redis = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 1 });
    redis.on('error', () => undefined);
    const env = { REDIS_HOST: '127.0.0.1', REDIS_PORT: String(port) };
    const starts = await Promise.allSettled([startApp(app.dir, env), startApp(app.dir, env)]);
    for (const start of starts) if (start.status === 'fulfilled') apps.push(start.value); // afterAll stops them
    for (const start of starts) if (start.status === 'rejected') throw start.reason;
    [a, b] = apps;
    process.stderr.write(
      `test/compat ${name}: npm install ${seconds(app.installMs)}, tsc ${seconds(app.compileMs)}, ` +
        `Redis and two instances up in ${seconds(Date.now() - upFrom)}\n`,
    );
  }, 300_000);

  afterAll(async () => {
    // Exactly the two app processes and the Redis this block started, by pid.
    await Promise.all(apps.map((running) => running.stop()));
    redis?.disconnect();
    if (topology) await stopTopology(topology);
  }, 60_000);

  it('installs from the tarball without flags, next to one copy of Nest and ioredis', () => {
    expect(app.installOutput).not.toMatch(/ERESOLVE|peer dep/i);
    expect(app.installOutput).not.toContain("package: 'nestjs-redis-lock"); // no EBADENGINE of ours
    for (const dependency of ['@nestjs/common', '@nestjs/core', 'ioredis', 'rxjs', 'reflect-metadata']) {
      expect(installedVersion(app.dir, dependency)).toBe(declared.dependencies[dependency]);
      // A peer, not a dependency: the library resolves the app's copy, never one of its own.
      expect(installedVersion(join(app.dir, 'node_modules', 'nestjs-redis-lock'), dependency)).toBeUndefined();
    }
  });

  it(`runs as ${moduleSystem} with the app's own ioredis (RESP${resp})`, async () => {
    for (const instance of [a, b]) {
      const { status, body } = await call('GET', `${instance.url}/runtime`);
      expect(status).toBe(200);
      expect(body).toEqual({ moduleSystem, sharedIoredis: true });
    }
    // Every connection of the two apps (the lock client's, its subscriber's, the app's own) speaks the
    // protocol this ioredis defaults to: RESP2 on 5, RESP3 (HELLO 3) on 6.
    const ours = await redis.client('ID');
    const clients = String(await redis.client('LIST'))
      .trim()
      .split('\n')
      .filter((line) => !line.startsWith(`id=${ours} `));
    expect(clients.length).toBeGreaterThanOrEqual(6);
    expect(new Set(clients.map((line) => /\bresp=(\d)/.exec(line)?.[1]))).toEqual(new Set([String(resp)]));
  });

  it('gives ES modules every export of the package as a named import (cjs-module-lexer)', async () => {
    // The library is CommonJS; Node hands an ES module only the names cjs-module-lexer finds statically.
    const script = [
      "import * as esm from 'nestjs-redis-lock';",
      "import { createRequire } from 'node:module';",
      "const cjs = createRequire(import.meta.url)('nestjs-redis-lock');",
      'const missing = Object.keys(cjs).filter((name) => !(name in esm));',
      'console.log(JSON.stringify({ exports: Object.keys(cjs), missing, same: esm.LockService === cjs.LockService }));',
    ].join('\n');
    const output = await run(process.execPath, ['--input-type=module', '-e', script], { cwd: app.dir });
    const result = JSON.parse(output.trim().split('\n').pop()!) as {
      exports: string[];
      missing: string[];
      same: boolean;
    };
    expect(result.missing).toEqual([]);
    // The packed entry point exports exactly the public API docs/api.md lists.
    expect(result.exports.sort()).toEqual(documentedPublicApi().sort());
    expect(result.same).toBe(true);
  });

  it('ships the lock board entry point (nestjs-redis-lock/board) with its page script, as named ES module imports', async () => {
    const script = [
      "import * as esm from 'nestjs-redis-lock/board';",
      "import { createRequire } from 'node:module';",
      "const cjs = createRequire(import.meta.url)('nestjs-redis-lock/board');",
      'const missing = Object.keys(cjs).filter((name) => !(name in esm));',
      'let refused = "";',
      'try { esm.RedisLockBoardModule.forRoot({}); } catch (error) { refused = error.name; }',
      'console.log(JSON.stringify({ exports: Object.keys(cjs), missing, refused }));',
    ].join('\n');
    const output = await run(process.execPath, ['--input-type=module', '-e', script], { cwd: app.dir });
    const result = JSON.parse(output.trim().split('\n').pop()!) as {
      exports: string[];
      missing: string[];
      refused: string;
    };
    expect(result).toEqual({
      exports: ['RedisLockBoardModule', 'LockBoardOptionsError'],
      missing: [],
      refused: 'LockBoardOptionsError', // neither a guard nor public: true
    });
    for (const file of ['board.js', 'board.css']) {
      expect(existsSync(join(app.dir, 'node_modules', 'nestjs-redis-lock', 'lib', 'board', 'web', file))).toBe(true);
    }
  });

  it(`@DistributedLock loses no update of a racy counter: ${REQUESTS} concurrent requests over two instances`, async () => {
    const replies = await Promise.all(
      Array.from({ length: REQUESTS }, (_, i) =>
        call<{ value: number }>('POST', `${(i % 2 ? b : a).url}/counter/page-views/increment`),
      ),
    );
    const ok = replies.filter((reply) => reply.status === 201);
    expect(replies.map((reply) => reply.status)).toEqual(replies.map(() => 201));
    // Each increment saw the one before it: the values handed out are exactly 1..n, and n is what is stored.
    expect(ok.map((reply) => reply.body.value).sort((x, y) => x - y)).toEqual(
      Array.from({ length: ok.length }, (_, i) => i + 1),
    );
    expect(Number(await redis.get('counter:page-views'))).toBe(ok.length);
    expect((await call('GET', `${a.url}/counter/page-views`)).body).toEqual({ value: ok.length });
  }, 60_000);

  it('answers 409 with Retry-After at once (waitTime 0) while the other instance holds the lock', async () => {
    const holding = call('POST', `${a.url}/report/monthly/hold?ms=2500`);
    let busy = await call('POST', `${b.url}/report/monthly`);
    for (const deadline = Date.now() + 2_000; busy.status !== 409 && Date.now() < deadline;) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      busy = await call('POST', `${b.url}/report/monthly`);
    }
    expect(busy.status).toBe(409);
    expect(Number(busy.retryAfter)).toBeGreaterThanOrEqual(1);
    expect((await holding).status).toBe(201);
    expect(await call('POST', `${b.url}/report/monthly`)).toMatchObject({ status: 201, body: { built: 'monthly' } });
  }, 30_000);

  it('LockService.withLock never oversells: concurrent takes over two instances, distinct fencing tokens', async () => {
    // Restocking goes through @DistributedLock on a provider method (the same lock, named from its argument).
    expect(await call('POST', `${a.url}/stock/widget/restock?count=${STOCK}`)).toMatchObject({
      status: 201,
      body: { left: STOCK, lockName: 'stock:widget' },
    });
    const replies = await Promise.all(
      Array.from({ length: REQUESTS }, (_, i) =>
        call<{ taken: boolean; left: number; fencingToken?: number }>(
          'POST',
          `${(i % 2 ? a : b).url}/stock/widget/take`,
        ),
      ),
    );
    expect(replies.map((reply) => reply.status)).toEqual(replies.map(() => 201));
    const taken = replies.map((reply) => reply.body).filter((body) => body.taken);
    expect(taken).toHaveLength(STOCK);
    expect(taken.map((body) => body.left).sort((x, y) => x - y)).toEqual(Array.from({ length: STOCK }, (_, i) => i));
    expect(new Set(taken.map((body) => body.fencingToken)).size).toBe(STOCK);
    expect(Number(await redis.get('stock:widget'))).toBe(0);
  }, 60_000);

  it('answers 503 from a decorated route while Redis is down', async () => {
    await stopNode(topology!, topology!.masters[0].port);
    // A wait that begins during an outage is retried for one operationTimeout (3 s by default), then 503.
    const replies = await Promise.all(
      [a, b].map((instance) => call<{ message: string }>('POST', `${instance.url}/counter/page-views/increment`)),
    );
    for (const reply of replies) {
      expect(reply.status).toBe(503);
      expect(reply.body.message).toContain('unavailable');
    }
  }, 30_000);
});
