import { spawn, type ChildProcess } from 'node:child_process';
import * as path from 'node:path';
import type { ContenderId } from './contenders';
import type { FromWorker, SharedSection, ToWorker, WorkerResult } from './protocol';

const WORKER = path.join(__dirname, '..', 'hot-key-worker.ts');

/**
 * One worker process and a queue of the messages it sent that nobody awaited yet (by default the
 * hot-key worker's messages; another kind of worker names its own).
 */
export class Worker<From extends { type: string } = FromWorker, To extends object = ToWorker> {
  private readonly inbox: From[] = [];
  private waiting?: { type: From['type']; resolve: (m: From) => void; reject: (e: Error) => void };
  exited = false;
  failure?: Error;

  constructor(readonly child: ChildProcess) {
    child.on('message', (message: From) => {
      if (message.type === 'error') {
        return this.fail(new Error(`worker ${child.pid}: ${(message as { message?: string }).message}`));
      }
      this.inbox.push(message);
      this.flush();
    });
    child.on('exit', (code, signal) => {
      this.exited = true;
      if (code !== 0 && code !== null) this.fail(new Error(`worker ${child.pid} exited with ${code}`));
      else if (signal && signal !== 'SIGTERM') this.fail(new Error(`worker ${child.pid} killed by ${signal}`));
      else this.fail(new Error(`worker ${child.pid} exited`));
    });
  }

  get pid(): number {
    return this.child.pid ?? -1;
  }

  send(message: To): void {
    if (this.failure) throw this.failure;
    this.child.send(message);
  }

  next<T extends From['type']>(type: T, timeoutMs: number): Promise<Extract<From, { type: T }>> {
    if (this.failure) return Promise.reject(this.failure);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiting = undefined;
        reject(new Error(`worker ${this.pid}: no '${type}' within ${timeoutMs} ms`));
      }, timeoutMs);
      this.waiting = {
        type,
        resolve: (m) => {
          clearTimeout(timer);
          resolve(m as Extract<From, { type: T }>);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      };
      this.flush();
    });
  }

  private flush(): void {
    const w = this.waiting;
    if (!w) return;
    const index = this.inbox.findIndex((m) => m.type === w.type);
    if (index < 0) return;
    const [message] = this.inbox.splice(index, 1);
    this.waiting = undefined;
    w.resolve(message);
  }

  private fail(error: Error): void {
    this.failure ??= error;
    const w = this.waiting;
    this.waiting = undefined;
    w?.reject(this.failure);
  }
}

/**
 * A fixed set of worker processes (`node --import tsx bench/hot-key-worker.ts`), reused by every
 * contender so process start-up never lands in a measurement. They inherit the bench's CPU
 * affinity, and exit by themselves when the bench's IPC channel closes.
 */
export class WorkerPool {
  private constructor(readonly workers: Worker[]) {}

  static async start(count: number, redisPort: number): Promise<WorkerPool> {
    const workers: Worker[] = [];
    for (let i = 0; i < count; i++) {
      // BENCH_WORKER_NODE_ARGS: extra node flags for the workers, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof".
      const extra = (process.env.BENCH_WORKER_NODE_ARGS ?? '').split(' ').filter(Boolean);
      const child = spawn(process.execPath, [...extra, '--import', 'tsx', WORKER], {
        cwd: path.join(__dirname, '..', '..'),
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
        env: { ...process.env, BENCH_REDIS_PORT: String(redisPort) },
      });
      workers.push(new Worker(child));
    }
    const pool = new WorkerPool(workers);
    livePools.add(pool);
    try {
      await Promise.all(workers.map((w) => w.next('ready', 60_000)));
    } catch (error) {
      await pool.close();
      throw error;
    }
    return pool;
  }

  get pids(): number[] {
    return this.workers.map((w) => w.pid);
  }

  /**
   * Starts `loops[i]` lock loops in worker i (workers with 0 loops stay idle); each critical section
   * sleeps `sectionMs` between its read and its write.
   */
  async run(
    contender: ContenderId,
    key: string,
    loops: number[],
    sectionMs = 0,
    shared?: SharedSection,
  ): Promise<Worker[]> {
    const active = this.workers.filter((_, i) => (loops[i] ?? 0) > 0);
    active.forEach((w) =>
      w.send({ type: 'run', contender, key, loops: loops[this.workers.indexOf(w)], sectionMs, shared }),
    );
    await Promise.all(active.map((w) => w.next('started', 30_000)));
    return active;
  }

  async mark(active: Worker[]): Promise<void> {
    active.forEach((w) => w.send({ type: 'mark' }));
    await Promise.all(active.map((w) => w.next('marked', 30_000)));
  }

  /** Stops the loops and collects each worker's results for grants inside the window. */
  async collect(active: Worker[], window: { windowStart: number; windowEnd: number }): Promise<WorkerResult[]> {
    active.forEach((w) => w.send({ type: 'stop', ...window }));
    const results = await Promise.all(active.map((w) => w.next('result', 60_000)));
    return results.map((m) => m.result);
  }

  /** Ask every worker to exit, wait for them (SIGKILL by pid after 5 s). */
  async close(): Promise<void> {
    for (const w of this.workers) if (!w.exited && w.child.connected) w.child.send({ type: 'exit' } satisfies ToWorker);
    const deadline = Date.now() + 5_000;
    while (this.workers.some((w) => !w.exited) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    this.killAll();
    livePools.delete(this);
  }

  /** Signals each still-running worker by its own pid. */
  killAll(): void {
    for (const w of this.workers) if (!w.exited && w.child.pid) w.child.kill('SIGKILL');
  }
}

const livePools = new Set<WorkerPool>();

/** For Ctrl-C and exit handlers: kill every worker started by this process. */
export function killAllWorkers(): void {
  for (const pool of livePools) pool.killAll();
}
