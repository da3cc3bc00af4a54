import Redis from 'ioredis';
import { LockClient, type LockLostError } from '../../lib';
import { quietLogger } from './engine';
import { ReplyDroppingProxy } from './reply-dropping-proxy';
import { sharedTopology } from './topologies';

/**
 * How a test client reaches Redis: straight; through the proxy on the application's ioredis client at
 * its defaults (`true`: it re-sends a command whose reply was lost); through the proxy on a connection
 * set up as the library sets up its own (`'library'`: it never re-sends, and fails at once when down);
 * or through the proxy on an application client that does not re-send (`'no-resend'`).
 */
export type Connection = undefined | true | 'library' | 'no-resend';

export interface IdentityClient {
  locks: LockClient;
  /** Every lockLost it emitted. */
  lost: LockLostError[];
}

/**
 * Lock clients that stand for processes (each with its own connections, client id and memory) on the
 * shared single Redis, some of them behind a proxy that can lose a reply, and a plain connection to
 * read Redis itself (the identity-by-id specs of issue 38).
 */
export class IdentityWorld {
  private readonly opened: LockClient[] = [];
  private readonly connections: Redis[] = [];

  private constructor(
    readonly keyPrefix: string,
    readonly proxy: ReplyDroppingProxy,
    readonly plain: Redis,
  ) {}

  static async start(keyPrefix: string): Promise<IdentityWorld> {
    const upstream = sharedTopology('single').masters[0];
    return new IdentityWorld(keyPrefix, await ReplyDroppingProxy.start(upstream), new Redis(upstream));
  }

  /** A client of its own, as another process would have (see Connection). */
  client(options: { viaProxy?: Connection; replicaSync?: false } = {}): IdentityClient {
    const redis = this.connect(options.viaProxy);
    this.connections.push(redis);
    const locks = new LockClient({
      redis,
      keyPrefix: this.keyPrefix,
      logger: quietLogger,
      replicaSync: options.replicaSync,
    });
    const lost: LockLostError[] = [];
    locks.on('lockLost', (error) => lost.push(error));
    this.opened.push(locks);
    return { locks, lost };
  }

  /** A client made elsewhere (createLockClient), closed with the others. */
  track(locks: LockClient): LockClient {
    this.opened.push(locks);
    return locks;
  }

  async close(): Promise<void> {
    await Promise.all(this.opened.map((c) => c.close()));
    for (const redis of this.connections) redis.disconnect();
    this.plain.disconnect();
    await this.proxy.close();
  }

  private connect(via: Connection): Redis {
    if (via === undefined) return new Redis(sharedTopology('single').masters[0]);
    const proxied = { host: '127.0.0.1', port: this.proxy.port };
    if (via === 'library') return new Redis({ ...proxied, maxRetriesPerRequest: 0, enableOfflineQueue: false });
    return new Redis({ ...proxied, autoResendUnfulfilledCommands: via === true });
  }
}

/**
 * An IdentityWorld for the spec that calls this at its top level: started before its tests, a reply
 * drop left armed cancelled after each, closed after all.
 */
export function useIdentityWorld(keyPrefix: string): Pick<IdentityWorld, 'proxy' | 'plain' | 'client' | 'track'> {
  let world: IdentityWorld | undefined;
  const started = (): IdentityWorld => {
    if (!world) throw new Error('the identity world is used before its beforeAll ran');
    return world;
  };
  beforeAll(async () => {
    world = await IdentityWorld.start(keyPrefix);
  });
  afterEach(() => world?.proxy.cancelDrop());
  afterAll(() => world?.close());
  return {
    get proxy() {
      return started().proxy;
    },
    get plain() {
      return started().plain;
    },
    client: (options) => started().client(options),
    track: (locks) => started().track(locks),
  };
}
