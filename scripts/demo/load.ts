/**
 * The load generator (the seed used JMeter: "666 requests at the same moment"): N GETs with at most C
 * in flight, over keep-alive connections, each timed; plus the small control requests (reset, read).
 */
import { setMaxListeners } from 'node:events';
import * as http from 'node:http';

export interface HttpResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

export interface RequestOptions {
  method?: string;
  agent?: http.Agent;
  timeoutMs?: number;
  signal?: AbortSignal;
}

/** One HTTP request; rejects on network errors and timeouts (any status resolves). */
export function request(url: string, opts: RequestOptions = {}): Promise<HttpResponse> {
  return new Promise((resolve, reject) => {
    const timeoutMs = opts.timeoutMs ?? 30_000;
    const req = http.request(
      url,
      { method: opts.method ?? 'GET', agent: opts.agent ?? false, signal: opts.signal },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }),
        );
        res.on('error', reject);
      },
    );
    req.setTimeout(timeoutMs, () => {
      const err = new Error(`no answer within ${timeoutMs / 1000}s`) as NodeJS.ErrnoException;
      err.code = 'TIMEOUT';
      req.destroy(err);
    });
    req.on('error', reject);
    req.end();
  });
}

/** `{"count": n}` -> n, else undefined. */
export function countOf(body: string): number | undefined {
  try {
    const count = (JSON.parse(body) as { count?: unknown }).count;
    return typeof count === 'number' && Number.isInteger(count) ? count : undefined;
  } catch {
    return undefined;
  }
}

export interface LoadResult {
  requests: number;
  /** 200 with a {"count": n} body. */
  ok: number;
  errors: number;
  /** Up to 5 distinct error descriptions, each with how often it happened. */
  errorSamples: string[];
  wallMs: number;
  /** Every request's latency in ms, ascending. */
  latenciesMs: number[];
  /** Answered requests per upstream (the balancer's X-Upstream header). */
  perUpstream: Record<string, number>;
}

export interface FireOptions {
  url: string;
  requests: number;
  concurrency: number;
  signal: AbortSignal;
  timeoutMs?: number;
  onProgress?: (done: number) => void;
}

/** Fire `requests` GETs at `url`, at most `concurrency` at a time. Rejects only when aborted. */
export async function fire(opts: FireOptions): Promise<LoadResult> {
  const workers = Math.min(opts.concurrency, opts.requests);
  setMaxListeners(workers + 20, opts.signal); // every request in flight listens for the abort
  // timeout: lets the agent honour the balancer's Keep-Alive hint for idle sockets (see proxy.ts).
  const agent = new http.Agent({ keepAlive: true, maxSockets: workers, maxFreeSockets: workers, timeout: 60_000 });
  const latencies: number[] = [];
  const perUpstream: Record<string, number> = {};
  const errorCounts = new Map<string, number>();
  let issued = 0;
  let done = 0;
  let ok = 0;

  const one = async (): Promise<void> => {
    const started = process.hrtime.bigint();
    let problem: string | undefined;
    try {
      const res = await request(opts.url, { agent, timeoutMs: opts.timeoutMs ?? 120_000, signal: opts.signal });
      const upstream = res.headers['x-upstream'];
      if (typeof upstream === 'string' && upstream !== '') perUpstream[upstream] = (perUpstream[upstream] ?? 0) + 1;
      if (res.status !== 200) problem = `HTTP ${res.status} ${res.body.slice(0, 160)}`.trim();
      else if (countOf(res.body) === undefined) problem = `HTTP 200 without {"count": n}: ${res.body.slice(0, 160)}`;
    } catch (err) {
      const e = err as NodeJS.ErrnoException;
      problem = e.code ?? e.message;
    }
    latencies.push(Number(process.hrtime.bigint() - started) / 1e6);
    if (problem === undefined) ok++;
    else errorCounts.set(problem, (errorCounts.get(problem) ?? 0) + 1);
    done++;
    opts.onProgress?.(done);
  };

  const started = process.hrtime.bigint();
  try {
    await Promise.all(
      Array.from({ length: workers }, async () => {
        while (issued < opts.requests && !opts.signal.aborted) {
          issued++;
          await one();
        }
      }),
    );
  } finally {
    agent.destroy();
  }
  opts.signal.throwIfAborted();
  const wallMs = Number(process.hrtime.bigint() - started) / 1e6;
  latencies.sort((a, b) => a - b);
  const errorSamples = [...errorCounts]
    .sort((a, b) => b[1] - a[1])
    .slice(0, 5)
    .map(([text, n]) => `${n}x ${text}`);
  return {
    requests: opts.requests,
    ok,
    errors: opts.requests - ok,
    errorSamples,
    wallMs,
    latenciesMs: latencies,
    perUpstream,
  };
}

/** A one-line progress bar on a TTY (nothing otherwise), redrawn at most every 50 ms. */
export class ProgressBar {
  private lastDraw = 0;
  private readonly enabled: boolean;

  constructor(
    private readonly label: string,
    private readonly total: number,
    private readonly stream: NodeJS.WriteStream = process.stderr,
  ) {
    this.enabled = stream.isTTY === true;
  }

  update(done: number): void {
    if (!this.enabled) return;
    const now = Date.now();
    if (done < this.total && now - this.lastDraw < 50) return;
    this.lastDraw = now;
    const width = 30;
    const filled = Math.round((done / this.total) * width);
    const bar = '█'.repeat(filled) + '░'.repeat(width - filled);
    this.stream.write(`\r\x1b[2K  ${this.label} ${bar} ${done}/${this.total}`);
  }

  clear(): void {
    if (this.enabled) this.stream.write('\r\x1b[2K');
  }
}
