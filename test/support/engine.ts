import { randomUUID } from 'node:crypto';
import Redis from 'ioredis';
import { LockClient, type LockClientOptions, type LockHandle, type LockLogger } from '../../lib';
import { sharedTopology } from './topologies';
import { sleep } from '../../scripts/tooling';

/** A fresh key prefix per test file keeps tests on the shared servers apart. */
export function testPrefix(): string {
  return `t-${randomUUID().slice(0, 8)}`;
}

export function singlePort(): number {
  return sharedTopology('single').masters[0].port;
}

/** A standalone ioredis client on the shared single server (or `port`). */
export function connect(port = singlePort(), connectionName?: string): Redis {
  return new Redis({ host: '127.0.0.1', port, connectionName, maxRetriesPerRequest: 1 });
}

export interface TestClient {
  redis: Redis;
  locks: LockClient;
  close(): Promise<void>;
}

/** A LockClient on its own connection; `close()` closes both. */
export function lockClient(
  options: Partial<LockClientOptions> & { port?: number; connectionName?: string } = {},
): TestClient {
  const { port, connectionName, ...rest } = options;
  const redis = connect(port, connectionName);
  const locks = new LockClient({ redis, logger: quietLogger, ...rest });
  return {
    redis,
    locks,
    async close() {
      await locks.close();
      await redis.quit().catch(() => redis.disconnect());
    },
  };
}

/** A logger of a test's own that records what it is told, warnings and errors alike, for the test to check. */
export function recordingLogger(): LockLogger & { messages: string[] } {
  const messages: string[] = [];
  return { messages, warn: (m) => messages.push(m), error: (m) => messages.push(m) };
}

/** Keeps expected warnings (lost locks in loss tests) out of the test output while recording them. */
export const quietLogger = {
  warnings: [] as string[],
  warn(message: string) {
    this.warnings.push(message);
  },
  error(message: string) {
    this.warnings.push(message);
  },
};

export { sleep };

/** Polls `check` until it returns true or `timeoutMs` passes (generous bounds: shared machines are noisy). */
export async function eventually(
  check: () => Promise<boolean> | boolean,
  timeoutMs = 10_000,
  stepMs = 25,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await sleep(stepMs);
  }
}

/** A command as `client.redis.sendCommand` receives it. */
export interface SentCommand {
  name: string;
  args: unknown[];
}

/**
 * Calls `onSent` with every command `client` sends from now on, and the promise of its reply; returns
 * the function that stops it. The library sends every script as EVALSHA (then EVAL once if the server
 * answers NOSCRIPT), through sendCommand.
 */
export function watchCommands(
  client: TestClient,
  onSent: (command: SentCommand, reply: Promise<unknown>) => void,
): () => void {
  const send = client.redis.sendCommand.bind(client.redis);
  client.redis.sendCommand = ((command: SentCommand, ...rest: unknown[]) => {
    const reply = (send as (...a: unknown[]) => Promise<unknown>)(command, ...rest);
    onSent(command, reply);
    return reply;
  }) as typeof client.redis.sendCommand;
  return () => {
    client.redis.sendCommand = send;
  };
}

/** Whether `command` is an attempt script (its keys the lock, then the fencing counter) on the lock key `lockKey`. */
export function isAttemptOn(command: SentCommand, lockKey: string): boolean {
  return /^eval/.test(command.name) && command.args[2] === lockKey && String(command.args[3]).endsWith(':fence');
}

/**
 * Starts `lock.lock()` on `waiter` (a lock that another client holds) and resolves, with the pending
 * acquisition, once the waiter is parked: its first attempt and its re-check after subscribing have
 * both been answered. Before that, the re-check could still barge in on a release the test makes.
 * (Not for a lock `waiter` still listens for from an earlier wait: it then parks after one attempt.)
 */
export async function parkedWait(
  waiter: TestClient,
  lock: { keys: { lock: string }; lock(options: { leaseTime: number }): Promise<LockHandle> },
): Promise<{ acquired: Promise<LockHandle> }> {
  let answered = 0;
  const stop = watchCommands(waiter, (command, reply) => {
    // An EVALSHA the server refuses with NOSCRIPT (its first call on a fresh server) is sent again as
    // EVAL: that one's answer counts.
    if (isAttemptOn(command, lock.keys.lock))
      void reply.then(
        () => answered++,
        (error: Error) => !/^NOSCRIPT/.test(error.message) && answered++,
      );
  });
  const acquired = lock.lock({ leaseTime: 60_000 });
  acquired.catch(() => undefined); // the caller awaits it
  try {
    await eventually(async () => answered >= 2, 5_000);
  } finally {
    stop();
  }
  return { acquired }; // wrapped: an async function would wait for a returned promise
}

/**
 * Two clients from `open` (e.g. two applications on one deployment): one holds a lock, the other
 * waits for it, and the release wakes the waiter at once (by its message, not the 30 s lease), with
 * a newer fencing token. Both clients are closed after.
 */
export async function expectReleaseToWakeAnotherClient(open: () => Promise<LockClient>): Promise<void> {
  const clients: LockClient[] = [];
  try {
    const [a, b] = [await open(), await open()];
    clients.push(a, b);
    const held = await a.getLock('wake-another').lock({ leaseTime: 30_000 });
    const waiting = b.getLock('wake-another').lock({ waitTime: 20_000 });
    await sleep(300); // parked on its channel
    const releasedAt = Date.now();
    expect(await held.release()).toBe('released');
    const next = await waiting;
    expect(Date.now() - releasedAt).toBeLessThan(1_000);
    expect(next.fencingToken).toBeGreaterThan(held.fencingToken);
    expect(await next.release()).toBe('released');
  } finally {
    await Promise.all(clients.map((c) => c.close()));
  }
}
