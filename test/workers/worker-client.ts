import Redis, { Cluster } from 'ioredis';
import { createLockClient, LockClient, RedLock, type ConnectionOptions, type ReplicaSyncSetting } from '../../lib';
import type { RedisClient } from '../../lib/internal';
import { silentLogger, sleep } from '../../scripts/tooling';

/**
 * Builds the worker's lock client from its environment (set by the spawning test): CONNECTION (JSON
 * connection options, any deployment) or REDIS_PORT (a single server). `redis` runs the worker's
 * own commands (the racy counter) on the same deployment.
 */
export async function workerClient(): Promise<{ redis: RedisClient; locks: LockClient }> {
  const settings = {
    keyPrefix: process.env.KEY_PREFIX,
    watchdogTimeout: process.env.WATCHDOG_MS ? Number(process.env.WATCHDOG_MS) : undefined,
    operationTimeout: process.env.OPERATION_TIMEOUT_MS ? Number(process.env.OPERATION_TIMEOUT_MS) : undefined,
    logger: { warn: (m: string) => console.error(m), error: (m: string) => console.error(m) },
    replicaSync: replicaSyncFromEnv(process.env.REPLICA_SYNC),
    turnTime: process.env.TURN_MS ? Number(process.env.TURN_MS) : undefined,
  };
  if (process.env.CONNECTION) {
    const connection = JSON.parse(process.env.CONNECTION) as ConnectionOptions;
    const locks = await createLockClient({ connection, ...settings });
    // The race's own data (counters) on a connection of its own, at ioredis's defaults (it re-sends a
    // command after a dropped connection, which the library's connections deliberately do not),
    // closed with the lock client as the shared one was.
    const data = dataClient(connection);
    const closeLocks = locks.close.bind(locks);
    locks.close = async () => {
      await closeLocks();
      data.disconnect();
    };
    return { redis: data, locks };
  }
  const redis = new Redis({ host: '127.0.0.1', port: Number(process.env.REDIS_PORT), maxRetriesPerRequest: 1 });
  const locks = new LockClient({ redis, ...settings, onClose: async () => void (await redis.quit()) });
  return { redis, locks };
}

function dataClient(connection: ConnectionOptions): RedisClient {
  switch (connection.type) {
    case 'cluster':
      return new Cluster(connection.nodes);
    case 'sentinel':
      return new Redis({ sentinels: connection.sentinels, name: connection.masterName });
    case 'master-slave':
      return new Redis(connection.master);
    case 'single':
      return connection.url ? new Redis(connection.url) : new Redis({ host: connection.host, port: connection.port });
    default:
      throw new Error(`CONNECTION of type ${connection.type} is not used by the workers`);
  }
}

/** REPLICA_SYNC: 'off' (never wait), 'enforced' (1 replica within 200 ms), unset: the default ('auto'). */
function replicaSyncFromEnv(value: string | undefined): ReplicaSyncSetting | undefined {
  if (value === 'off') return false;
  if (value === 'enforced') return { replicas: 1, timeout: 200 };
  return undefined;
}

/** The lock kind named by LOCK_KIND (reentrant by default). */
export function workerLock(locks: LockClient, name: string) {
  switch (process.env.LOCK_KIND ?? 'reentrant') {
    case 'fair':
      return locks.getFairLock(name, fairOptions());
    case 'simple':
      return locks.getSimpleLock(name, { leaseTime: workerLease() ?? 'watchdog' });
    case 'read':
      return locks.getReadWriteLock(name).readLock();
    case 'write':
      return locks.getReadWriteLock(name).writeLock();
    default:
      return locks.getLock(name);
  }
}

/** LEASE_MS: an explicit lease for every acquisition (none: the watchdog's). */
export function workerLease(): number | undefined {
  return process.env.LEASE_MS ? Number(process.env.LEASE_MS) : undefined;
}

export function fairOptions() {
  return {
    staleWaiterTimeout: process.env.STALE_MS ? Number(process.env.STALE_MS) : undefined,
    acceptanceLease: process.env.ACCEPT_MS ? Number(process.env.ACCEPT_MS) : undefined,
  };
}

export { sleep } from '../../scripts/tooling';

/**
 * Waits for the race to start: until START_AT (ms since the epoch), or, with START_AT=signal, prints
 * `ready` and waits for a `go` line on stdin (see startTogether in test/support/workers.ts), so that a
 * race starts as soon as every process is ready, however long starting them took.
 */
export async function raceStart(): Promise<void> {
  const startAt = process.env.START_AT;
  if (startAt !== 'signal') return sleep(Math.max(0, Number(startAt) - Date.now()));
  console.log('ready');
  await new Promise<void>((resolve) => {
    let input = '';
    const onData = (chunk: Buffer) => {
      input += chunk.toString();
      if (!input.split('\n').includes('go')) return;
      process.stdin.off('data', onData);
      process.stdin.pause();
      resolve();
    };
    process.stdin.on('data', onData);
  });
}

/** RedLock over the independent masters listed in REDLOCK_PORTS (comma-separated). */
export function workerRedLock(name: string): { redLock: RedLock; close(): Promise<void> } {
  const clients = process.env.REDLOCK_PORTS!.split(',').map((port) => {
    const redis = new Redis({ host: '127.0.0.1', port: Number(port), maxRetriesPerRequest: 1 });
    return new LockClient({ redis, keyPrefix: process.env.KEY_PREFIX, operationTimeout: 500, logger: silentLogger });
  });
  return {
    redLock: new RedLock(clients, name),
    async close() {
      await Promise.all(clients.map((c) => c.close().catch(() => undefined)));
      clients.forEach((c) => (c.redis as Redis).disconnect());
    },
  };
}
