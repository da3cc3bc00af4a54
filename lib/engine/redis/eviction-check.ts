import type { Socket } from 'node:net';
import type { Cluster, Redis } from 'ioredis';
import { bounded } from './bounded';
import type { LockLogger } from '../util/logger';
import type { RedisClient } from './redis-client';

/** A Redis memory setting under which locks can vanish. */
export interface EvictionRisk {
  maxmemory: number;
  policy: string;
}

/**
 * Whether `INFO memory` describes a Redis that may evict keys: a memory limit with any policy but
 * noeviction. volatile-* policies pick among the keys that have a TTL, which is every held lock;
 * allkeys-* take any key, the fencing counters too. Without a limit nothing is evicted.
 */
export function evictionRisk(info: string): EvictionRisk | undefined {
  const maxmemory = Number(/^maxmemory:(\d+)\s*$/m.exec(info)?.[1] ?? 0);
  const policy = /^maxmemory_policy:(\S+)\s*$/m.exec(info)?.[1];
  if (maxmemory === 0 || policy === undefined || policy === 'noeviction') return undefined;
  return { maxmemory, policy };
}

/**
 * Checks each master this client locks on, every time its connection becomes ready (so the master a
 * failover promoted too), and warns once per master and setting when Redis may evict locks: an
 * evicted lock is free to the next caller while its holder still works, and an evicted fencing
 * counter starts again from 1. Never fails anything: a master that cannot be read is not judged.
 */
export class EvictionCheck {
  private readonly warned = new Set<string>();
  /** Cluster nodes whose connection is not ready yet, read once it is. */
  private readonly awaiting = new WeakSet<Redis>();

  constructor(
    private readonly redis: RedisClient,
    private readonly operationTimeout: number,
    private readonly logger: LockLogger,
  ) {}

  /**
   * Reads every master's memory settings in the background. A Cluster's node
   * connections are made when first needed: one not ready yet is read once it is, never connected for this.
   */
  run(): void {
    const masters = this.redis.isCluster ? (this.redis as Cluster).nodes('master') : [this.redis as Redis];
    for (const node of masters) {
      if (node.status === 'ready') void this.check(node).catch(() => undefined);
      else if (!this.awaiting.has(node)) {
        this.awaiting.add(node);
        node.once('ready', () => {
          this.awaiting.delete(node);
          void this.check(node).catch(() => undefined);
        });
      }
    }
  }

  private async check(node: Redis): Promise<void> {
    const info = await bounded(node.info('memory'), this.operationTimeout, { name: 'memory check' });
    const risk = evictionRisk(info);
    if (!risk) return;
    const address = addressOf(node);
    const seen = `${address} ${risk.policy} ${risk.maxmemory}`;
    if (this.warned.has(seen)) return;
    this.warned.add(seen);
    this.logger.warn(
      `Redis at ${address} may evict locks: maxmemory ${risk.maxmemory} bytes with maxmemory-policy ` +
        `${risk.policy}. Under memory pressure a held lock can be evicted and granted to another caller, ` +
        'and a fencing counter can start again from 1. Set maxmemory-policy to noeviction (new locks are ' +
        'then refused with RedisRefusedError while memory is full), or keep locks on a Redis that does not evict.',
    );
  }
}

/** Where the connection goes: its socket's peer (a sentinel-resolved master), else its options. */
function addressOf(node: Redis): string {
  const socket = (node as unknown as { stream?: Socket }).stream;
  if (socket?.remoteAddress && socket.remotePort) return `${socket.remoteAddress}:${socket.remotePort}`;
  return `${node.options.host ?? '127.0.0.1'}:${node.options.port ?? 6379}`;
}
