import { randomUUID } from 'node:crypto';
import Redis from 'ioredis';
import { ExecutionError, Redlock } from '@sesamecare-oss/redlock';
import { Mutex, Semaphore, TimeoutError } from 'redis-semaphore';
import { LockClient, RedisPubSub } from './subject';
import { sleep } from '../../scripts/tooling';
import { HandOffFloor } from './hand-off-floor';
import { PermitFloor } from './permit-floor';
import { RedissonScript } from './redisson-script';

/**
 * Every lock under test behind one small interface. Each contender waits until it gets the lock:
 * where a library gives up on its own (redlock after retryCount attempts, redis-semaphore after
 * acquireTimeout) the bench asks again and counts a give-up, so waits are measured from the first
 * request to the grant.
 */
export type Release = () => Promise<unknown>;

export interface Contender {
  readonly id: ContenderId;
  acquire(key: string, signal?: AbortSignal): Promise<Release>;
  /** How often the library's own wait ran out and the bench called acquire again. */
  readonly giveUps: number;
  /** Resolves once the contender's own connections are ready (awaited before any measurement). */
  ready(): Promise<void>;
  close(): Promise<void>;
}

export const CONTENDER_IDS = [
  'reentrant',
  'reentrant-no-otel',
  'fair',
  'simple',
  'redlock',
  'redlock-10ms',
  'semaphore',
  'raw',
  'permits',
  'rs-semaphore',
  'read',
  'write',
  'redisson-script',
  'hand-off-floor',
  'permit-floor',
  'red-lock',
  'redlock-masters',
] as const;
export type ContenderId = (typeof CONTENDER_IDS)[number];

/**
 * Our locks' LockClient `turnTime` when set (`npm run bench -- --turn-time=MS` sets it for the bench
 * and its workers); unset: the library's default.
 */
export const TURN_TIME_ENV = 'BENCH_TURN_TIME';

/** Permits of both semaphores in the shared-holders scenario. */
export const SHARED_LIMIT = 5;

export const CONTENDER_LABELS: Record<ContenderId, string> = {
  reentrant: 'ours: reentrant',
  'reentrant-no-otel': 'ours: reentrant, telemetry off',
  fair: 'ours: fair',
  simple: 'ours: simple',
  redlock: 'redlock (defaults)',
  'redlock-10ms': 'redlock retryDelay 10 ms',
  semaphore: 'redis-semaphore Mutex',
  raw: 'raw SET NX floor',
  permits: 'ours: semaphore',
  'rs-semaphore': 'redis-semaphore Semaphore',
  read: 'ours: read lock',
  write: 'ours: write lock',
  'redisson-script': "Redisson's lock script, bare",
  'hand-off-floor': 'wake-one FIFO floor',
  'permit-floor': 'FIFO permit hand-over floor',
  'red-lock': 'ours: RedLock',
  'redlock-masters': 'redlock, 5 masters',
};

/** What each contender runs with, for the report. */
export const CONTENDER_CONFIG: Record<ContenderId, string> = {
  reentrant:
    '`getLock(name).lock()`: watchdog lease 30 s, pub/sub wait, processes take 10 ms turns (`turnTime` default)',
  'reentrant-no-otel':
    'the same with `telemetry: false`: no OpenTelemetry instrumentation at all, the baseline of its cost with no SDK registered',
  fair: '`getFairLock(name).lock()`: watchdog lease 30 s, FIFO queue, direct hand-off to the queue head',
  simple: '`getSimpleLock(name).lock()`: defaults (lease 3 s, no watchdog), pub/sub wait, 10 ms turns',
  redlock:
    '`@sesamecare-oss/redlock` 1.4.0 over one client, all defaults (retryCount 10, retryDelay 200 ms, retryJitter 100 ms); lock duration 30 s',
  'redlock-10ms':
    'same, `retryDelay: 10`; every other setting default (so retryJitter stays 100 ms: each pause is uniform in 0..110 ms, 0 about 45% of the time)',
  semaphore:
    '`redis-semaphore` 5.8.0 `Mutex`, all defaults (lockTimeout 10 s, acquireTimeout 10 s, retryInterval 10 ms)',
  raw: 'written here: `SET key token PX 30000 NX`, retry after a 5 ms sleep; release by a compare-and-delete Lua script',
  permits: `\`getSemaphore(name, { permits: ${SHARED_LIMIT} }).acquire()\`: one permit, watchdog lease, woken by releases (pub/sub)`,
  'rs-semaphore': `\`redis-semaphore\` 5.8.0 \`Semaphore\` of ${SHARED_LIMIT}, all defaults (lockTimeout 10 s, acquireTimeout 10 s, retryInterval 10 ms)`,
  read: '`getReadWriteLock(name).readLock().lock()`: watchdog lease, shared with every other reader',
  write:
    '`getReadWriteLock(name).writeLock().lock()`: watchdog lease 30 s, exclusive of readers and other writers; many names only',
  'redisson-script':
    "written here (bench/lib/redisson-script.ts): Redisson RLock's acquire and release scripts (owner hash, PEXPIRE, publish on the last release) called directly, nothing around them; uncontended latency only",
  'hand-off-floor':
    'written here (bench/lib/hand-off-floor.ts): a queue, a reservation for the next process and a message to it alone, every grant moving to the next process in line as with the fair lock; no re-entry, fencing, watchdog, bounds or failover care; hot keys only',
  'permit-floor':
    'written here (bench/lib/permit-floor.ts): a set of holders and a queue; a release puts the next in line in its place and tells its process alone, whose message is the grant, every grant moving to the next acquisition in line as with our semaphore; no leases, fencing, watchdog, bounds or failover care; shared holders only',
  'red-lock':
    '`new RedLock(clients, name).lock()` over five independent masters (one `LockClient` each): watchdog lease 30 s, woken by the releases of the masters that refused; RedLock scenario only',
  'redlock-masters':
    '`@sesamecare-oss/redlock` 1.4.0 over the same five masters, all defaults (retryCount 10, retryDelay 200 ms, retryJitter 100 ms); lock duration 30 s; RedLock scenario only',
};

/** Polling locks: they retry on a timer instead of being told about a release. */
export const POLLING: ReadonlySet<ContenderId> = new Set<ContenderId>(['redlock', 'redlock-10ms', 'semaphore', 'raw']);
export const OURS: ReadonlySet<ContenderId> = new Set<ContenderId>(['reentrant', 'fair', 'simple']);
/**
 * Variants of ours that exist only to measure a cost (the no-SDK instrumentation's): measured where
 * that cost is reported (uncontended, hot key), left out of the other scenarios and the chart.
 */
export const BASELINES: ReadonlySet<ContenderId> = new Set<ContenderId>(['reentrant-no-otel']);

/**
 * Reference designs written here, the least a lock of that design can cost on this machine: not
 * peers, not in the goals or the chart. `redisson-script` is measured uncontended, `hand-off-floor`
 * on the hot keys, `permit-floor` with the shared holders.
 */
export const FLOORS: ReadonlySet<ContenderId> = new Set<ContenderId>([
  'redisson-script',
  'hand-off-floor',
  'permit-floor',
]);

/** Locks that admit several holders at once (a semaphore, a read lock): measured in the shared-holders scenario only. */
export const SHARED_HOLDERS: ReadonlySet<ContenderId> = new Set<ContenderId>([
  'permits',
  'rs-semaphore',
  'read',
  'permit-floor',
]);

/**
 * The locks measured on many names, each locked and released once (what a name leaves in Redis):
 * every kind of ours, and the peers that take a name of their own per lock. `write` runs there only.
 */
export const MANY_NAMES: ReadonlySet<ContenderId> = new Set<ContenderId>([
  'reentrant',
  'fair',
  'simple',
  'permits',
  'read',
  'write',
  'redlock',
  'semaphore',
  'rs-semaphore',
  'redisson-script',
]);
const MANY_NAMES_ONLY: ReadonlySet<ContenderId> = new Set<ContenderId>(['write']);

/**
 * The RedLock scenario's contenders (bench/scenarios/red-lock.ts): locks over five independent masters,
 * measured there only (the other scenarios run on one server).
 */
export const RED_LOCK_CONTENDERS: ReadonlySet<ContenderId> = new Set<ContenderId>(['red-lock', 'redlock-masters']);

/**
 * Who runs where: `locks` (parallel, many waiters, the chart): the mutexes; `uncontended` and `hot`:
 * those plus the baselines and the floor of that scenario; `shared`: the shared holders plus our
 * reentrant lock, the exclusive reference; `names`: MANY_NAMES; `redlock`: RED_LOCK_CONTENDERS.
 */
export function contendersFor(
  ids: readonly ContenderId[],
  scenario: 'locks' | 'uncontended' | 'hot' | 'shared' | 'names' | 'redlock',
): ContenderId[] {
  if (scenario === 'names') return ids.filter((id) => MANY_NAMES.has(id));
  if (scenario === 'redlock') return ids.filter((id) => RED_LOCK_CONTENDERS.has(id));
  const elsewhere = ids.filter((id) => !MANY_NAMES_ONLY.has(id) && !RED_LOCK_CONTENDERS.has(id));
  switch (scenario) {
    case 'locks':
      return elsewhere.filter((id) => !BASELINES.has(id) && !SHARED_HOLDERS.has(id) && !FLOORS.has(id));
    case 'uncontended':
      return elsewhere.filter((id) => !SHARED_HOLDERS.has(id) && id !== 'hand-off-floor');
    case 'hot':
      return elsewhere.filter((id) => !SHARED_HOLDERS.has(id) && id !== 'redisson-script');
    case 'shared':
      return elsewhere.filter((id) => SHARED_HOLDERS.has(id) || id === 'reentrant');
  }
}

/** The commands each contender's client sends itself (everything else in commandstats runs inside its scripts). */
const SCRIPTS = ['evalsha', 'eval', 'script|load'];
export const CLIENT_COMMANDS: Record<ContenderId, string[]> = {
  reentrant: [...SCRIPTS, 'subscribe', 'unsubscribe'],
  'reentrant-no-otel': [...SCRIPTS, 'subscribe', 'unsubscribe'],
  fair: [...SCRIPTS, 'subscribe', 'unsubscribe'],
  simple: [...SCRIPTS, 'subscribe', 'unsubscribe'],
  redlock: SCRIPTS,
  'redlock-10ms': SCRIPTS,
  semaphore: [...SCRIPTS, 'set'],
  raw: [...SCRIPTS, 'set'],
  permits: [...SCRIPTS, 'subscribe', 'unsubscribe'],
  // redis-semaphore acquires and refreshes by script, but releases with a plain ZREM.
  'rs-semaphore': [...SCRIPTS, 'zrem'],
  read: [...SCRIPTS, 'subscribe', 'unsubscribe'],
  write: [...SCRIPTS, 'subscribe', 'unsubscribe'],
  'redisson-script': SCRIPTS,
  'hand-off-floor': [...SCRIPTS, 'subscribe'],
  'permit-floor': [...SCRIPTS, 'subscribe'],
  'red-lock': [...SCRIPTS, 'subscribe', 'unsubscribe'],
  'redlock-masters': SCRIPTS,
};

const LEASE_MS = 30_000;
const RAW_RETRY_MS = 5;

export interface ContenderOptions {
  /** Called with each connection a contender opens itself (ours: the pub/sub connection), to count its commands. */
  onConnection?: (connection: Redis) => void;
  /** Our clients' `idleKeyTtl` (ms); unset: the library's default. */
  idleKeyTtl?: number;
}

export function createContender(id: ContenderId, redis: Redis, options: ContenderOptions = {}): Contender {
  switch (id) {
    case 'reentrant':
    case 'reentrant-no-otel':
    case 'fair':
    case 'simple':
      return new OurLock(id, redis, options);
    case 'redlock':
      return new RedlockContender(id, redis, {});
    case 'redlock-10ms':
      return new RedlockContender(id, redis, { retryDelay: 10 });
    case 'semaphore':
      return new RedisSemaphoreContender(id, (key) => new Mutex(redis, key));
    case 'raw':
      return new RawSetNx(redis);
    case 'permits':
    case 'read':
    case 'write':
      return new OurLock(id, redis, options);
    case 'rs-semaphore':
      return new RedisSemaphoreContender(id, (key) => new Semaphore(redis, key, SHARED_LIMIT));
    case 'redisson-script':
      return new RedissonScript(redis);
    case 'hand-off-floor':
      return new HandOffFloor(redis);
    case 'permit-floor':
      return new PermitFloor(redis);
    case 'red-lock':
    case 'redlock-masters':
      throw new Error(`${id} runs over five masters: bench/scenarios/red-lock.ts measures it`);
  }
}

class OurLock implements Contender {
  readonly giveUps = 0;
  readonly client: LockClient;
  private readonly subscriber: Redis;

  constructor(
    readonly id: 'reentrant' | 'reentrant-no-otel' | 'fair' | 'simple' | 'permits' | 'read' | 'write',
    redis: Redis,
    options: ContenderOptions,
  ) {
    // Exactly what LockClient does by default (a duplicate connection for pub/sub, closed with the
    // client), made here only so its SUBSCRIBE/UNSUBSCRIBE can be counted too.
    const subscriber = redis.duplicate();
    options.onConnection?.(subscriber);
    this.subscriber = subscriber;
    this.client = new LockClient({
      redis,
      pubsub: new RedisPubSub(subscriber, false, true),
      keyPrefix: 'bench',
      // Default (undefined): instrumented through the global providers, with no SDK registered here.
      telemetry: id === 'reentrant-no-otel' ? false : undefined,
      turnTime: process.env[TURN_TIME_ENV] === undefined ? undefined : Number(process.env[TURN_TIME_ENV]),
      idleKeyTtl: options.idleKeyTtl,
    });
  }

  /**
   * The pub/sub connection must be ready before the first wait: a SUBSCRIBE sent while it is still
   * connecting makes ioredis's ready check fail and reconnect, and an unlock message published in
   * that gap is lost (see "Engine findings" in docs/benchmarks.md). A start-up race, kept out of
   * the steady-state numbers here and reported separately.
   */
  ready(): Promise<void> {
    if (this.subscriber.status === 'ready') return Promise.resolve();
    return new Promise((resolve) => this.subscriber.once('ready', () => resolve()));
  }

  async acquire(key: string, signal?: AbortSignal): Promise<Release> {
    if (this.id === 'permits') {
      const permit = await this.client.getSemaphore(key, { permits: SHARED_LIMIT }).acquire({ signal });
      return () => permit.release();
    }
    if (this.id === 'read' || this.id === 'write') {
      const rw = this.client.getReadWriteLock(key);
      const side = await (this.id === 'read' ? rw.readLock() : rw.writeLock()).lock({ signal });
      return () => side.release();
    }
    const lock =
      this.id === 'reentrant' || this.id === 'reentrant-no-otel'
        ? this.client.getLock(key)
        : this.id === 'fair'
          ? this.client.getFairLock(key)
          : this.client.getSimpleLock(key);
    const handle = await lock.lock({ signal });
    return () => handle.release();
  }

  close(): Promise<void> {
    return this.client.close();
  }
}

class RedlockContender implements Contender {
  giveUps = 0;
  private readonly redlock: Redlock;

  constructor(
    readonly id: 'redlock' | 'redlock-10ms',
    redis: Redis,
    settings: { retryDelay?: number },
  ) {
    this.redlock = new Redlock([redis], settings);
    // redlock emits every refused attempt as an 'error' event; without a listener Node would throw.
    this.redlock.on('error', () => undefined);
  }

  async acquire(key: string, signal?: AbortSignal): Promise<Release> {
    for (;;) {
      signal?.throwIfAborted();
      try {
        const lock = await this.redlock.acquire([`redlock:${key}`], LEASE_MS);
        if (signal?.aborted) {
          await lock.release();
          signal.throwIfAborted();
        }
        return () => lock.release();
      } catch (error) {
        if (!(error instanceof ExecutionError)) throw error;
        this.giveUps++;
      }
    }
  }

  async ready(): Promise<void> {}

  async close(): Promise<void> {
    // The client is the bench's; Redlock.quit() would close it.
  }
}

/**
 * redis-semaphore's `Mutex` or `Semaphore` at its defaults: its own wait gives up after `acquireTimeout`,
 * and the bench asks again, counting a give-up.
 */
class RedisSemaphoreContender implements Contender {
  giveUps = 0;

  constructor(
    readonly id: 'semaphore' | 'rs-semaphore',
    private readonly create: (key: string) => Mutex | Semaphore,
  ) {}

  async acquire(key: string, signal?: AbortSignal): Promise<Release> {
    for (;;) {
      const held = this.create(key);
      try {
        await held.acquire(signal);
        return () => held.release();
      } catch (error) {
        if (!(error instanceof TimeoutError)) throw error;
        this.giveUps++;
      }
    }
  }

  async ready(): Promise<void> {}

  async close(): Promise<void> {}
}

/** The floor: the least a correct lock can do. Written for this bench. */
class RawSetNx implements Contender {
  readonly id = 'raw' as const;
  readonly giveUps = 0;

  constructor(private readonly redis: Redis) {
    redis.defineCommand('benchRawUnlock', {
      numberOfKeys: 1,
      lua: "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0",
    });
  }

  async acquire(key: string, signal?: AbortSignal): Promise<Release> {
    const name = `raw:${key}`;
    const token = randomUUID();
    for (;;) {
      signal?.throwIfAborted();
      if ((await this.redis.set(name, token, 'PX', LEASE_MS, 'NX')) === 'OK') {
        return () => (this.redis as unknown as RawUnlock).benchRawUnlock(name, token);
      }
      await sleep(RAW_RETRY_MS);
    }
  }

  async ready(): Promise<void> {}

  async close(): Promise<void> {}
}

interface RawUnlock {
  benchRawUnlock(key: string, token: string): Promise<number>;
}
