/**
 * `npm run demo`: the seed's page-view experiment, end to end, on this machine.
 *
 *   1. Redis: the one the environment configures (lockOptionsFromEnv's variables, REDLOCK_NODES for
 *      v4) when every address answers PING; otherwise a local topology on the dev ports
 *      (scripts/redis-topology.ts: 7400 single, 7410 master-slave, 7420 sentinel, 7430 cluster,
 *      7440 RedLock's 5 masters). A dev topology that already runs (npm run redis:up) is reused.
 *   2. Two sample-app instances (3101, 3102 or the next free ports) behind a round-robin load
 *      balancer on 3100: nginx when on PATH, else the built-in proxy (scripts/demo/proxy.ts).
 *   3. Per version: DELETE /pview, N concurrent GET /vN/pview through the balancer, GET /pview, and
 *      a table of expected vs counted requests, lost updates and latencies.
 *   4. Everything it started is stopped at the end, on errors and on Ctrl-C; --keep leaves Redis up;
 *      --board keeps everything up until Ctrl-C, for the lock board at <balancer>/locks.
 *      Exit code 0 when v3, v4 and v5 counted every request, else 1 (2: bad usage), so CI can gate.
 *
 * The sample app's side of the contract: `node --import tsx sample-app/src/main.ts` with PORT and
 * the Redis env; ready when GET /health answers 200 {"status":"ok"}; GET /v1..v5/pview count one view
 * each and answer {"count": n}; GET /pview answers {"count": n}; DELETE /pview resets it to 0; it
 * exits on SIGTERM.
 *
 * stdout carries only the result (the table, or with --json one JSON object); everything else, the
 * progress bar included (on a TTY only), goes to stderr. `tsx scripts/demo.ts --help` for the options.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { APP_ENTRY, choosePorts, outputTail, startApp, type AppInstance } from './demo/apps';
import { parseArgs, USAGE, UsageError, type DemoArgs, type Version } from './demo/args';
import { startBalancer, type Balancer } from './demo/balancer';
import { Cleanup, message } from './demo/cleanup';
import { countOf, fire, ProgressBar, request } from './demo/load';
import { prepareRedis, type RedisSetup } from './demo/redis';
import { buildRow, formatMs, formatTable, verdict, type VersionRow } from './demo/report';

const ROOT = path.resolve(__dirname, '..');
const log = (line: string): void => void process.stderr.write(`${line}\n`);

interface Run {
  args: DemoArgs;
  redis?: RedisSetup;
  apps: AppInstance[];
  balancer?: Balancer;
  rows: VersionRow[];
}

async function main(argv: string[]): Promise<number> {
  let args: DemoArgs;
  try {
    args = parseArgs(argv);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    log(`${err.message}\n\n${USAGE}`);
    return 2;
  }
  if (args.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }

  const cleanup = new Cleanup(log);
  const abort = new AbortController();
  let interrupted: NodeJS.Signals | undefined;
  let interruptedAt = 0;
  const onSignal = (sig: NodeJS.Signals): void => {
    const code = 128 + (os.constants.signals[sig] ?? 15);
    if (interrupted) {
      // Ctrl-C under npm/tsx can arrive twice at once (terminal + relay): only a later one forces.
      if (Date.now() - interruptedAt < 1000) return;
      log(`\n${sig} again: killing what is left without waiting`);
      cleanup.runSync();
      process.exit(code);
    }
    interrupted = sig;
    interruptedAt = Date.now();
    abort.abort(new Error(`interrupted by ${sig}`)); // first: it also clears a progress bar
    log(`\n${sig}: stopping everything the demo started (again to force)...`);
    void cleanup.run().then(() => {
      log('stopped.');
      process.exit(code);
    });
  };
  const onExit = (): void => cleanup.runSync();
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  process.on('SIGHUP', onSignal); // the terminal went away: still stop the apps
  process.on('exit', onExit);

  const run: Run = { args, apps: [], rows: [] };
  let failure: string | undefined;
  try {
    await experiment(run, cleanup, abort.signal);
  } catch (err) {
    if (abort.signal.aborted) {
      await cleanup.run();
      return 128 + (os.constants.signals[interrupted ?? 'SIGINT'] ?? 2);
    }
    failure = message(err);
  }
  // Results last, once everything is stopped.
  await cleanup.run();
  if (failure !== undefined) log(`\ndemo failed: ${failure}`);
  if (args.json) printJson(run, failure);
  else if (run.rows.length > 0) process.stdout.write(`\n${formatTable(run.rows)}\n`); // partial on failure
  return failure === undefined && verdict(run.rows).ok ? 0 : 1;
}

async function experiment(run: Run, cleanup: Cleanup, signal: AbortSignal): Promise<void> {
  const { args } = run;
  if (!fs.existsSync(path.join(ROOT, APP_ENTRY))) throw new Error(`${APP_ENTRY} not found under ${ROOT}`);

  run.redis = await prepareRedis(process.env, {
    log,
    signal,
    cleanup,
    keep: args.keep,
    redlock: args.versions.includes('v4'),
  });
  const ports = await choosePorts({ port: args.port, appPorts: args.appPorts });
  const env = run.redis.env;
  const starts = ports.apps.map((port) =>
    startApp({ root: ROOT, port, env, cleanup, log, verbose: args.verbose, signal }).then((app) => {
      run.apps.push(app);
      return app;
    }),
  );
  // Wait for both before failing, so the error names every instance that did not come up.
  const settled = await Promise.allSettled(starts);
  const failed = settled.flatMap((s) => (s.status === 'rejected' ? [message(s.reason)] : []));
  if (failed.length > 0) throw new Error(failed.join('\n\n'));
  run.apps.sort((a, b) => a.port - b.port);

  run.balancer = await startBalancer({
    choice: args.balancer,
    port: ports.balancer,
    upstreams: run.apps.map((a) => ({ host: '127.0.0.1', port: a.port })),
    cleanup,
    log,
    signal,
  });
  log(`balancer: ${run.balancer.description}`);
  log(`lock board: ${run.balancer.url}/locks (each instance shows its own events; the locks of both)`);
  log(
    `\n${args.requests} requests per version, ${Math.min(args.concurrency, args.requests)} at a time, ` +
      `on ${run.redis.deployType} Redis: ${args.versions.join(', ')}\n`,
  );

  for (const version of args.versions) {
    const row = await runVersion(run, version, signal);
    run.rows.push(row);
    log(
      `  ${version}: counted ${row.counted} of ${row.expected}` +
        `${row.errors > 0 ? `, ${row.errors} failed` : ''} in ${formatMs(row.wallMs)}`,
    );
    if (row.errorSamples.some((e) => e.includes('TIMEOUT')) && version !== args.versions.at(-1)) {
      log('    (requests timed out: the apps may still be working on them, which can skew the next versions)');
    }
  }
  log('');
  if (args.board) {
    if (!args.json) process.stdout.write(`${formatTable(run.rows)}\n`);
    log(`\nThe apps stay up for the lock board: ${run.balancer.url}/locks. Ctrl-C stops everything.`);
    // Ctrl-C aborts `signal`: main() then stops everything the demo started.
    await new Promise((_resolve, reject) =>
      signal.addEventListener('abort', () => reject(signal.reason), { once: true }),
    );
  }
}

async function runVersion(run: Run, version: Version, signal: AbortSignal): Promise<VersionRow> {
  const base = run.balancer!.url;
  await resetCounter(run, signal);
  const bar = new ProgressBar(version, run.args.requests);
  signal.addEventListener('abort', () => bar.clear(), { once: true });
  let load;
  try {
    load = await fire({
      url: `${base}/${version}/pview`,
      requests: run.args.requests,
      concurrency: run.args.concurrency,
      signal,
      onProgress: (done) => {
        if (!signal.aborted) bar.update(done);
      },
    });
  } finally {
    bar.clear();
  }
  assertAppsRunning(run, `during ${version}`);
  return buildRow(version, load, await readCounter(run, signal));
}

async function resetCounter(run: Run, signal: AbortSignal): Promise<void> {
  const res = await request(`${run.balancer!.url}/pview`, { method: 'DELETE', signal });
  if (res.status < 200 || res.status >= 300) {
    throw new Error(`DELETE /pview answered HTTP ${res.status} ${res.body.slice(0, 300)}; expected 2xx`);
  }
  const count = await readCounter(run, signal);
  if (count !== 0) throw new Error(`DELETE /pview answered ${res.status} but GET /pview then said ${count}, not 0`);
}

async function readCounter(run: Run, signal: AbortSignal): Promise<number> {
  const res = await request(`${run.balancer!.url}/pview`, { signal });
  const count = res.status === 200 ? countOf(res.body) : undefined;
  if (count === undefined) {
    throw new Error(`GET /pview answered HTTP ${res.status} ${res.body.slice(0, 300)}; expected 200 {"count": n}`);
  }
  return count;
}

function assertAppsRunning(run: Run, when: string): void {
  for (const app of run.apps) {
    if (app.child.exitCode !== null || app.child.signalCode !== null) {
      throw new Error(
        `sample-app :${app.port} (pid ${app.pid}) exited ${when} (${app.child.exitCode ?? app.child.signalCode})` +
          outputTail(app),
      );
    }
  }
}

function printJson(run: Run, error?: string): void {
  const result = {
    ok: error === undefined && verdict(run.rows).ok,
    ...(error !== undefined ? { error } : {}),
    deployment: run.redis?.deployType,
    redis: run.redis?.main,
    redlock: run.redis?.redlock ?? null,
    balancer: run.balancer ? { kind: run.balancer.kind, url: run.balancer.url, pid: run.balancer.pid } : null,
    apps: run.apps.map((a) => ({ port: a.port, pid: a.pid })),
    requests: run.args.requests,
    concurrency: run.args.concurrency,
    rows: run.rows,
    failures: verdict(run.rows).failures,
  };
  process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    log(`demo failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    process.exitCode = 1;
  },
);
