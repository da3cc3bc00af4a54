import { AsyncResource } from 'node:async_hooks';
import { randomUUID } from 'node:crypto';
import Redis from 'ioredis';
import { createLockClient, LockClient, runInLockScope } from '../../lib';
import { signalNode, startTopology, stopTopology, type RunningTopology } from '../../scripts/redis-topology';
import { ReplyDroppingProxy } from '../support/reply-dropping-proxy';
import type { ClientIndex } from './steps';
import { PRIVATE_PORTS } from '../../scripts/test-ports';

/**
 * What the lock model runs against: a private redis-server (SIGSTOP is a fault here, so never the
 * shared one), a reply-dropping proxy in front of it, and three lock clients through that proxy:
 * - c0 over the application's own ioredis client at ioredis's defaults (it re-sends a command whose
 *   reply was lost, on the new connection);
 * - c1 and c2 from createLockClient, on the library's connection options (no re-send, no offline queue).
 * Redis itself is read through `admin`, a plain connection straight to the server.
 */

/** Port of the private server (claimed in scripts/redis-topology.ts's header). */
export const MODEL_BASE_PORT = PRIVATE_PORTS.model.base;

/** Every client's watchdog lease: renewed every third of it. */
export const WATCHDOG_MS = 4_000;
export const OPERATION_TIMEOUT_MS = 2_000;

/** Lost locks are expected here: they are counted, not printed. */
const quiet = { warn: () => undefined, error: () => undefined };

/** Runs a function inside one lock scope that lasts as long as the client (its 'scope' owner). */
export type ScopeRunner = <T>(fn: () => T) => T;

export interface ModelClient {
  index: ClientIndex;
  locks: LockClient;
  /** The connection name its lock and pub/sub connections carry (CLIENT LIST / CLIENT KILL). */
  connectionName: string;
  inScope: ScopeRunner;
}

export class World {
  readonly keyPrefix = `model-${randomUUID().slice(0, 8)}`;
  readonly clients: ModelClient[] = [];
  private appRedis?: Redis;
  private frozen = false;

  private constructor(
    readonly topology: RunningTopology,
    readonly proxy: ReplyDroppingProxy,
    readonly admin: Redis,
  ) {}

  static async start(): Promise<World> {
    const topology = await startTopology('single', { basePort: MODEL_BASE_PORT });
    const upstream = topology.masters[0];
    const proxy = await ReplyDroppingProxy.start(upstream);
    const admin = new Redis({ host: upstream.host, port: upstream.port, connectionName: 'model-admin' });
    const world = new World(topology, proxy, admin);
    await world.connectClients();
    return world;
  }

  private async connectClients(): Promise<void> {
    const settings = {
      keyPrefix: this.keyPrefix,
      watchdogTimeout: WATCHDOG_MS,
      operationTimeout: OPERATION_TIMEOUT_MS,
      logger: quiet,
      telemetry: false as const,
    };
    const name = (i: number) => `${this.keyPrefix}-c${i}`;
    // ioredis defaults, but for the name that lets the fault injector find its connections.
    this.appRedis = new Redis({ host: '127.0.0.1', port: this.proxy.port, connectionName: name(0) });
    const app = new LockClient({ redis: this.appRedis, ...settings });
    const fromLibrary = (i: number) =>
      createLockClient({
        connection: {
          type: 'single',
          host: '127.0.0.1',
          port: this.proxy.port,
          // Friendly stacks: an error a command ends with (a dropped connection's) names the code that sent it.
          redisOptions: { connectionName: name(i), showFriendlyErrorStack: true },
        },
        ...settings,
      });
    const all = [app, await fromLibrary(1), await fromLibrary(2)];
    all.forEach((locks, i) =>
      this.clients.push({ index: i as ClientIndex, locks, connectionName: name(i), inScope: persistentScope() }),
    );
  }

  /**
   * CLIENT KILL of a client's command connection, or of its pub/sub connection (the other one under
   * its name); how many were killed. The command connection is told apart by its address: the
   * proxy's connection to Redis for the client's own socket.
   */
  async kill(client: ClientIndex, connection: 'lock' | 'pubsub'): Promise<number> {
    const { locks, connectionName } = this.clients[client];
    const localPort = (locks.redis as Redis).stream?.localPort;
    const lockPort = localPort === undefined ? undefined : this.proxy.upstreamPortFor(localPort);
    if (lockPort === undefined) return 0; // not connected right now
    const list = String(await this.admin.client('LIST'));
    let killed = 0;
    for (const line of list.split('\n')) {
      const fields = Object.fromEntries(
        line
          .trim()
          .split(' ')
          .map((pair) => [pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1)]),
      );
      if (fields.name !== connectionName) continue;
      if (fields.addr?.endsWith(`:${lockPort}`) !== (connection === 'lock')) continue;
      killed += Number(await this.admin.client('KILL', 'ID', fields.id).catch(() => 0));
    }
    return killed;
  }

  /** Freezes Redis (SIGSTOP) for `ms` while `during` runs; always thaws it. */
  async frozenFor<T>(ms: number, during: () => Promise<T>): Promise<T> {
    const port = this.topology.masters[0].port;
    await signalNode(this.topology, port, 'SIGSTOP');
    this.frozen = true;
    let thawed: Promise<void> | undefined;
    try {
      const running = during();
      thawed = sleep(ms).then(() => this.thaw());
      const [result] = await Promise.all([running, thawed]);
      return result;
    } finally {
      await (thawed ?? this.thaw());
    }
  }

  private async thaw(): Promise<void> {
    if (!this.frozen) return;
    this.frozen = false;
    await signalNode(this.topology, this.topology.masters[0].port, 'SIGCONT');
  }

  async close(): Promise<void> {
    await this.thaw().catch(() => undefined);
    await Promise.all(this.clients.map((c) => c.locks.close().catch(() => undefined)));
    this.appRedis?.disconnect();
    this.admin.disconnect();
    await this.proxy.close();
    await stopTopology(this.topology);
  }
}

/** A lock scope that outlives the call that opened it: functions passed in later run inside it. */
function persistentScope(): ScopeRunner {
  return runInLockScope(() => AsyncResource.bind(<T>(fn: () => T): T => fn()), { newScope: true });
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
