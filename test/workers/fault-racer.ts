// One of the fault suite's racing processes (test/faults/). It loops on one lock until told "stop"
// on stdin; inside every critical section it does a racy read-modify-write of a counter on a
// separate, never-faulted Redis (COUNTER_PORT), so overlapping holders lose updates, and records
// [requested, start, end] in high-resolution epoch time (performance.timeOrigin + now(): comparable
// across processes on one machine) with the fencing token. Errors while Redis fails over are
// counted and retried, never fatal. Prints "ready" once connected, and its result as JSON on exit.
//
// Environment (besides worker-client.ts's CONNECTION, KEY_PREFIX, LOCK_KIND, WATCHDOG_MS):
//   LOCK_NAME, COUNTER_PORT, COUNTER_KEY   the hot key and the racy counter
//   LEASE_MS     explicit leaseTime; omitted: a watchdog lease
//   WAIT_MS      waitTime of each lock() (default 10000)
//   WORK_MS      sleep inside the critical section, between the read and the write (default 0)
//   FENCE_KEY    also write the fencing token to a token-checking resource on the counter's Redis
//   FENCED_COUNTER  make the counter itself token-checking: its read and its write are refused to a
//                token below the highest one that touched it (a section refused is counted, not written)
//   SIDE_LOCK    also hold a second (watchdog) lock for the whole run, and record when it is lost
//   PAUSED_HOLDER  take the lock once with LEASE_MS, print "holding", sleep HOLD_MS (the
//                test SIGSTOPs the process meanwhile), then try the fenced write and exit
// stdin: "hold" makes the next acquisition print "holding <n>" and keep the lock until "release"
// (then sleep AFTER_HOLD_MS before racing again); "stop" ends the run.
import { createInterface } from 'node:readline';
import Redis from 'ioredis';
import { LockLostError, type LockHandle } from '../../lib';
import { sleep, workerClient, workerLock } from './worker-client';
import { epochNow } from '../../scripts/tooling';

const env = process.env;
const numberEnv = (name: string, fallback: number): number => (env[name] ? Number(env[name]) : fallback);

/** Accepts a write only if its token is at least the highest one seen (a fencing-aware resource). */
const FENCED_WRITE = `
local top = tonumber(redis.call('HGET', KEYS[1], 'token') or '0')
if tonumber(ARGV[1]) < top then return 0 end
redis.call('HSET', KEYS[1], 'token', ARGV[1], 'writer', ARGV[2])
return 1`;

/** Enters the critical section's record of holders on the counter server; returns who is inside. */
const ENTER = `redis.call('SADD', KEYS[1], ARGV[1]) return redis.call('SMEMBERS', KEYS[1])`;

/** The counter as a fenced resource: {1, value} to a token at least the highest seen, else {0}. */
const FENCED_READ = `
local top = tonumber(redis.call('HGET', KEYS[2], 'token') or '0')
if tonumber(ARGV[1]) < top then return {0} end
redis.call('HSET', KEYS[2], 'token', ARGV[1])
return {1, redis.call('GET', KEYS[1]) or '0'}`;
const FENCED_SET = `
local top = tonumber(redis.call('HGET', KEYS[2], 'token') or '0')
if tonumber(ARGV[1]) < top then return 0 end
redis.call('SET', KEYS[1], ARGV[2])
return 1`;

export interface FaultRacerResult {
  pid: number;
  /** The lock client's id (the first segment of its waiter ids). */
  clientId: string;
  /** lock() calls that took over 500 ms or failed: [requested, ended, outcome] (for failure reports). */
  slowCalls: [number, number, string][];
  /** The lock connection's events (close, reconnecting, ready, error): [at, event] (for failure reports). */
  connection: [number, string][];
  /** One per critical section: [requested, start, end, fencingToken]. */
  sections: [number, number, number, number][];
  /**
   * Critical sections that found another holder inside: each section INCRs a count of holders on the
   * counter server as it starts and DECRs it as it ends, so this needs no clock shared by the racers.
   */
  crowded: number;
  /** Each crowded section's token with the tokens of the other sections it found inside. */
  crowdedWith: [number, number[]][];
  /** FENCED_COUNTER: the tokens of sections the counter refused (they wrote nothing). */
  fencedOut: number[];
  /** Critical sections whose signal had aborted with a LockLostError by their end, by reason. */
  lost: Record<string, number>;
  /** Errors of lock()/release(), by name, and release outcomes, by outcome. */
  errors: Record<string, number>;
  releases: Record<string, number>;
  fenced: { accepted: number; rejected: number };
  side?: { acquiredAt: number; lostAt?: number; reason?: string };
  paused?: {
    token: number;
    acquiredAt: number;
    resumedAt: number;
    abortedBeforeWrite: boolean;
    abortedAfterWrite: boolean;
    reason?: string;
    write: 'accepted' | 'rejected';
    release: string;
  };
}

const bump = (counts: Record<string, number>, key: string): void => void (counts[key] = (counts[key] ?? 0) + 1);
const errorName = (error: unknown): string => {
  const { name, message } = error as Error;
  return name === 'Error' ? `Error(${String(message).slice(0, 50)})` : name;
};

async function main(): Promise<void> {
  const { locks } = await workerClient();
  const counter = new Redis({ host: '127.0.0.1', port: Number(env.COUNTER_PORT), maxRetriesPerRequest: 1 });
  const lock = workerLock(locks, env.LOCK_NAME!);
  const leaseTime = env.LEASE_MS ? Number(env.LEASE_MS) : undefined;
  const waitTime = numberEnv('WAIT_MS', 10_000);
  const workMs = numberEnv('WORK_MS', 0);
  const insideKey = `${env.COUNTER_KEY}:inside`;
  const result: FaultRacerResult = {
    pid: process.pid,
    clientId: locks.clientId,
    slowCalls: [],
    connection: [],
    sections: [],
    crowded: 0,
    crowdedWith: [],
    fencedOut: [],
    lost: {},
    errors: {},
    releases: {},
    fenced: { accepted: 0, rejected: 0 },
  };
  const fenceOfCounter = `${env.COUNTER_KEY}:fence`;
  /** The counter's value, or undefined when a fenced counter refuses this token. */
  const readCounter = async (token: number): Promise<number | undefined> => {
    if (!env.FENCED_COUNTER) return Number(await counter.get(env.COUNTER_KEY!));
    const [ok, value] = (await counter.eval(FENCED_READ, 2, env.COUNTER_KEY!, fenceOfCounter, token)) as [
      number,
      string?,
    ];
    return ok === 1 ? Number(value) : undefined;
  };
  const writeCounter = async (token: number, value: number): Promise<boolean> => {
    if (!env.FENCED_COUNTER) return (await counter.set(env.COUNTER_KEY!, String(value))) === 'OK';
    return (await counter.eval(FENCED_SET, 2, env.COUNTER_KEY!, fenceOfCounter, token, value)) === 1;
  };
  const fencedWrite = async (token: number): Promise<boolean> => {
    const ok = (await counter.eval(FENCED_WRITE, 1, env.FENCE_KEY!, token, process.pid)) === 1;
    result.fenced[ok ? 'accepted' : 'rejected']++;
    return ok;
  };

  // 'end' too: a connection ioredis gives up on is connected again by the library (lifecycle.ts), and a
  // stall after it is told apart from one inside a connect only by this event.
  for (const event of ['close', 'reconnecting', 'ready', 'error', 'end', '+node', '-node']) {
    locks.redis.on(event, (arg: unknown) =>
      result.connection.push([epochNow(), arg instanceof Error ? `${event} ${arg.message}` : event]),
    );
  }
  const stop = new AbortController();
  let holdNext = false;
  let holds = 0;
  let releaseHold: (() => void) | undefined;
  createInterface({ input: process.stdin }).on('line', (line) => {
    if (line === 'stop') stop.abort();
    if (line === 'hold') holdNext = true;
    if (line === 'release') releaseHold?.();
  });

  if (env.SIDE_LOCK) {
    const side = await locks.getLock(`${env.LOCK_NAME}:side:${process.pid}`).lock();
    const record: NonNullable<FaultRacerResult['side']> = (result.side = { acquiredAt: epochNow() });
    side.signal.addEventListener('abort', () => {
      record.lostAt = epochNow();
      const reason: unknown = side.signal.reason;
      record.reason = reason instanceof LockLostError ? reason.reason : errorName(reason);
    });
  }
  await counter.ping();
  console.log('ready');

  if (env.PAUSED_HOLDER) {
    const handle = await lock.lock({ leaseTime, waitTime });
    const acquiredAt = epochNow();
    console.log('holding');
    await sleep(numberEnv('HOLD_MS', 1_000)); // SIGSTOPped in here, past the lease
    const resumedAt = epochNow();
    const abortedBeforeWrite = handle.signal.aborted;
    const accepted = await fencedWrite(handle.fencingToken);
    const reason: unknown = handle.signal.reason;
    result.paused = {
      token: handle.fencingToken,
      acquiredAt,
      resumedAt,
      abortedBeforeWrite,
      abortedAfterWrite: handle.signal.aborted,
      reason: reason instanceof LockLostError ? reason.reason : undefined,
      write: accepted ? 'accepted' : 'rejected',
      release: await handle.release().catch(errorName),
    };
  } else {
    while (!stop.signal.aborted) {
      const requested = epochNow();
      let handle: LockHandle;
      try {
        handle = await lock.lock({ leaseTime, waitTime, signal: stop.signal });
        if (epochNow() - requested > 500) result.slowCalls.push([requested, epochNow(), 'acquired']);
      } catch (error) {
        if (stop.signal.aborted) break;
        const cause = (error as { cause?: Error }).cause;
        result.slowCalls.push([
          requested,
          epochNow(),
          `${errorName(error)}: ${(error as Error).message} ${cause ? `(${cause.message})` : ''}`,
        ]);
        bump(result.errors, errorName(error));
        await sleep(50);
        continue;
      }
      const start = epochNow();
      const token = handle.fencingToken;
      const others = ((await counter.eval(ENTER, 1, insideKey, token)) as string[]).map(Number);
      const crowdedBy = others.filter((other) => other !== token);
      if (crowdedBy.length > 0) {
        result.crowded++;
        result.crowdedWith.push([token, crowdedBy]);
      }
      const value = await readCounter(token);
      if (workMs > 0) await sleep(workMs);
      if (holdNext) {
        holdNext = false;
        console.log(`holding ${++holds}`);
        await new Promise<void>((resolve) => (releaseHold = resolve));
      }
      const written = value !== undefined && (await writeCounter(token, value + 1));
      if (!written) result.fencedOut.push(token);
      if (env.FENCE_KEY) await fencedWrite(token);
      await counter.srem(insideKey, String(token));
      const end = epochNow();
      result.sections.push([requested, start, end, handle.fencingToken]);
      if (handle.signal.aborted) {
        const reason: unknown = handle.signal.reason;
        bump(result.lost, reason instanceof LockLostError ? reason.reason : errorName(reason));
      }
      try {
        bump(result.releases, await handle.release());
      } catch (error) {
        bump(result.errors, `release: ${errorName(error)}`);
      }
      if (releaseHold) {
        releaseHold = undefined;
        await sleep(numberEnv('AFTER_HOLD_MS', 0));
      }
    }
  }
  await locks.close().catch(() => undefined);
  counter.disconnect();
  console.log(JSON.stringify(result));
  process.exit(0);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
