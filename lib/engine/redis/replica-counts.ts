import { monotonicNow } from '../util/clock';
import type { Redis } from 'ioredis';
import { RedisUnavailableError } from '../errors';

/** Online replicas of a master, from `INFO replication` (a replica or an unreadable answer: 0). */
export function onlineReplicas(info: string): number {
  if (!/^role:master\s*$/m.test(info)) return 0;
  return info.split('\n').filter((line) => /^slave\d+:.*state=online/.test(line)).length;
}

/** A node's count, when it was read, and the forget() generation it belongs to. */
interface Known {
  count: number;
  at: number;
  generation: number;
}

/**
 * How many replicas each master has online, read with `INFO replication` at most once per `ttlMs`
 * per node (a stale count is used while a fresh one is read behind it). `forget()` on a reconnect:
 * after a failover the same connection talks to another master.
 */
export class ReplicaCounts {
  private readonly known = new WeakMap<Redis, Known>();
  private readonly reading = new WeakMap<Redis, Promise<number>>();
  private generation = 0;

  constructor(
    private readonly read: (node: Redis) => Promise<string>,
    private readonly ttlMs = 1_000,
  ) {}

  /** The count known now (a stale one starts a fresh read behind it), or undefined before the first read. */
  knownNow(node: Redis): number | undefined {
    const known = this.known.get(node);
    if (!known || known.generation !== this.generation) return undefined;
    if (monotonicNow() - known.at >= this.ttlMs) void this.refresh(node).catch(() => undefined);
    return known.count;
  }

  /** The count, read now when none is known; rejects with RedisUnavailableError when the master cannot be reached. */
  async of(node: Redis): Promise<number> {
    const known = this.known.get(node);
    if (known && known.generation === this.generation) {
      if (monotonicNow() - known.at >= this.ttlMs) void this.refresh(node).catch(() => undefined);
      return known.count;
    }
    // An unreadable answer (an ACL without INFO) counts as no replica; an unreachable master is the caller's to judge.
    return this.refresh(node).catch((error: unknown) => {
      if (error instanceof RedisUnavailableError) throw error;
      return 0;
    });
  }

  /** Counts `node` as replica-less until the next read (its replicas did not acknowledge in time). */
  degrade(node: Redis): void {
    this.known.set(node, { count: 0, at: monotonicNow(), generation: this.generation });
  }

  forget(): void {
    this.generation++;
  }

  /** Bumped by every forget(): a connection that reconnected since may reach another master. */
  get epoch(): number {
    return this.generation;
  }

  private refresh(node: Redis): Promise<number> {
    const pending = this.reading.get(node);
    if (pending) return pending;
    const generation = this.generation;
    const reading = this.read(node)
      .then((info) => {
        const count = onlineReplicas(info);
        if (generation === this.generation) this.known.set(node, { count, at: monotonicNow(), generation });
        return count;
      })
      .finally(() => this.reading.delete(node));
    this.reading.set(node, reading);
    return reading;
  }
}
