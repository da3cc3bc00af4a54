import { monotonicNow } from '../util/clock';
import type { Cluster, Redis } from 'ioredis';
import { bounded } from './bounded';
import { slotThrough } from './cluster-slot';
import { LockOptionsError, ReplicaSyncError } from '../errors';
import type { LockLogger } from '../util/logger';
import type { RedisClient } from './redis-client';
import { durationProblem, show, TIMEOUT_RULE, wholeMilliseconds } from '../util/validation';
import { ReplicaCounts } from './replica-counts';

/**
 * After Redisson's synced-replicas check: once a lock is written, WAIT until `replicas` replicas
 * have it (or `timeout` ms pass). It narrows, but does not close, the failover window: Redis
 * replication stays asynchronous, and a replica that acknowledged can still lose the write if it
 * is not the one promoted.
 */
export interface ReplicaSyncOptions {
  /** Replicas that must acknowledge each acquisition. */
  replicas: number;
  /** How long to wait for them, in ms. */
  timeout: number;
  /** 'release' (default): release and throw ReplicaSyncError; 'warn': keep the lock, log a warning. */
  onFailure?: 'release' | 'warn';
}

/**
 * `'auto'` (the default): when the lock's master has a replica online, each first acquisition waits
 * (up to AUTO_SYNC_TIMEOUT_MS) until one replica has it, so a failover, which promotes the most
 * up-to-date replica, keeps the lock; a master without replicas costs nothing, and a replica that
 * does not answer is logged, never an error. An object: a required count, enforced. `false`: never wait.
 */
export type ReplicaSyncSetting = ReplicaSyncOptions | 'auto' | false;

/**
 * What replica sync found after a grant (see ReplicaSync.afterGrant): 'synced', the grant stands as it
 * is (acknowledged, or kept as the setting says); 'unverified', its master stopped answering first.
 */
export type SyncVerdict = 'synced' | 'unverified';

/** How long 'auto' waits for a replica's acknowledgement (Redisson's slavesSyncTimeout). */
export const AUTO_SYNC_TIMEOUT_MS = 1_000;

/**
 * Everything wrong with `sync` as replica-sync options, each naming the field; none when it is
 * omitted (the client then uses 'auto'). The one rule for the engine (checkReplicaSync) and Nest.
 */
export function replicaSyncProblems(sync: unknown): string[] {
  if (sync === undefined || sync === 'auto' || sync === false) return [];
  if (sync === null || typeof sync !== 'object') {
    return [`replicaSync must be 'auto', false or an object such as { replicas: 1, timeout: 100 }, got ${show(sync)}`];
  }
  const { replicas, timeout, onFailure } = sync as Partial<ReplicaSyncOptions>;
  const problems: string[] = [];
  if (!Number.isInteger(replicas) || (replicas as number) < 1) {
    problems.push(`replicaSync.replicas must be a positive integer, got ${show(replicas)}`);
  }
  if (timeout === undefined) problems.push('replicaSync.timeout is required (ms)');
  else {
    const problem = durationProblem('replicaSync.timeout', timeout, TIMEOUT_RULE);
    if (problem) problems.push(problem);
  }
  if (onFailure !== undefined && onFailure !== 'release' && onFailure !== 'warn') {
    problems.push(`replicaSync.onFailure must be 'release' or 'warn', got ${show(onFailure)}`);
  }
  return problems;
}

/**
 * The client's setting: omitted means 'auto'; an object's timeout in whole milliseconds.
 * @throws LockOptionsError listing every problem, before any connection is made
 */
export function checkReplicaSync(sync: unknown): ReplicaSyncSetting {
  if (sync === undefined) return 'auto';
  const problems = replicaSyncProblems(sync);
  if (problems.length > 0) {
    throw new LockOptionsError(`${problems.join('; ')}.`, undefined, { option: 'replicaSync', value: sync });
  }
  const setting = sync as ReplicaSyncSetting;
  return typeof setting === 'object' ? { ...setting, timeout: wholeMilliseconds(setting.timeout) } : setting;
}

/** Runs WAIT on `node` (the connection that wrote) and returns how many replicas acknowledged. */
export async function waitForReplicas(node: Redis, replicas: number, timeout: number): Promise<number> {
  return (await node.call('WAIT', replicas, timeout)) as number;
}

/**
 * The connection a lock's scripts ran on: WAIT counts that connection's own writes. undefined for
 * a Cluster between slot maps, which knows no master for the key.
 */
export function nodeForKey(client: RedisClient, key: string): Redis | undefined {
  return client.isCluster ? masterForKey(client as Cluster, key) : (client as Redis);
}

function masterForKey(cluster: Cluster, key: string): Redis | undefined {
  const [masterKey] = cluster.slots[slotThrough(cluster, key)] ?? [];
  return cluster.nodes('master').find((n) => `${n.options.host}:${n.options.port}` === masterKey);
}

/** Warnings of 'auto' are logged at most this often per client. */
const AUTO_WARNING_INTERVAL_MS = 10_000;

/**
 * The replica-sync step of every acquisition, as the client's setting says: nothing, 'auto' or an
 * enforced count (see ReplicaSyncSetting).
 */
export class ReplicaSync {
  private readonly counts: ReplicaCounts;
  private lastWarning = -Infinity;

  constructor(
    readonly setting: ReplicaSyncSetting,
    private readonly redis: RedisClient,
    private readonly operationTimeout: number,
    private readonly logger: LockLogger,
  ) {
    this.counts = new ReplicaCounts((node) =>
      bounded(node.info('replication'), operationTimeout, { name: 'replica count' }),
    );
  }

  /**
   * The connection epoch: taken when an attempt is sent and handed back to afterGrant, it tells
   * whether the connection that granted the lock was lost since (a reconnect forgets the counts).
   */
  get epoch(): number {
    return this.counts.epoch;
  }

  /**
   * Resolves once the lock `name` just written under `key` (by an attempt sent in epoch `grantedIn`)
   * is on enough replicas. With an enforced count that is not reached: `release()` (unless onFailure
   * is 'warn') and ReplicaSyncError. 'unverified' ('auto', or 'warn'): the connection that granted it was
   * lost before a replica answered, so a failover may have lost the grant; the caller must check
   * that the master serving the key now has it (see LockBase).
   */
  afterGrant(
    name: string,
    key: string,
    grantedIn: number,
    release: () => Promise<unknown>,
  ): Promise<SyncVerdict> | undefined {
    const setting = this.setting;
    if (setting === false) return undefined;
    if (setting === 'auto') return this.auto(name, key, grantedIn);
    return this.enforce(setting, name, key, grantedIn, release);
  }

  private async enforce(
    setting: Exclude<ReplicaSyncSetting, false | 'auto'>,
    name: string,
    key: string,
    grantedIn: number,
    release: () => Promise<unknown>,
  ): Promise<SyncVerdict> {
    const warn = setting.onFailure === 'warn';
    // A Cluster between slot maps has no node for the key: no acknowledgement ('release': release and
    // throw; 'warn' keeps only a grant the master serving the key has, see afterGrant).
    const node = nodeForKey(this.redis, key);
    if (!node && warn) return 'unverified';
    let acknowledged = 0;
    if (node) {
      try {
        acknowledged = await this.waitOnce(node, setting.replicas, setting.timeout);
      } catch {
        // The master stopped answering before its replicas did: a grant 'warn' keeps is checked first.
        if (warn) return 'unverified';
      }
    }
    if (warn && grantedIn !== this.epoch) return 'unverified';
    if (acknowledged >= setting.replicas) return 'synced';
    const error = new ReplicaSyncError(name, acknowledged, setting.replicas, setting.timeout);
    if (warn) {
      this.logger.warn(error.message);
      return 'synced';
    }
    await release().catch(() => undefined);
    throw error;
  }

  /**
   * Whether afterGrant may WAIT for a grant of `key` made now (an enforced count; 'auto' unless the
   * key's master is known to have no replica online). WAIT counts the writes of the connection it is
   * sent on: a grant another client's script made (a fair lock's hand-over told in a message) is one it
   * cannot vouch for, so such a grant is accepted on this connection first when this is true.
   */
  waitsAfterGrant(key: string): boolean {
    const setting = this.setting;
    if (setting === false) return false;
    if (setting !== 'auto') return true;
    const node = nodeForKey(this.redis, key);
    if (!node) return true;
    const known = this.counts.knownNow(node);
    // Not read since the connection was (re)made: read now, for the grants after this one.
    if (known === undefined) void this.counts.of(node).catch(() => undefined);
    return known !== 0;
  }

  /** After a reconnect the connection may reach another master (a failover): read its replicas again. */
  forget(): void {
    this.counts.forget();
  }

  /** undefined (at once, no promise: the hot path) when the master is known to have no replica. */
  private auto(name: string, key: string, grantedIn: number): Promise<SyncVerdict> | undefined {
    // Reconnected since the attempt was sent: no WAIT on this connection can vouch for that grant.
    if (grantedIn !== this.epoch) return Promise.resolve('unverified');
    const node = nodeForKey(this.redis, key);
    // No node: a Cluster between slot maps (its master dropped out of the pool, the promoted one not
    // mapped yet), the moment a failover may have lost the grant: checked where the key is served now.
    if (!node) return Promise.resolve('unverified');
    if (this.counts.knownNow(node) === 0) return undefined;
    return this.autoWait(name, node, grantedIn);
  }

  private async autoWait(name: string, node: Redis, grantedIn: number): Promise<SyncVerdict> {
    let replicas: number;
    let acknowledged: number;
    try {
      replicas = await this.counts.of(node);
      acknowledged = replicas === 0 ? 0 : await this.waitOnce(node, 1, AUTO_SYNC_TIMEOUT_MS);
    } catch {
      return 'unverified'; // the master stopped answering between the grant and its replicas' answer
    }
    // A WAIT that a reconnected connection sent (a client with an offline queue) counts another master's replicas.
    if (grantedIn !== this.epoch) return 'unverified';
    if (replicas === 0 || acknowledged >= 1) return 'synced';
    // The master answered, its replicas did not: kept. Not waiting again on this master until its
    // replicas are read afresh: one stall, not one per lock.
    this.counts.degrade(node);
    if (monotonicNow() - this.lastWarning >= AUTO_WARNING_INTERVAL_MS) {
      this.lastWarning = monotonicNow();
      this.logger.warn(
        `Lock "${name}": no replica acknowledged it within ${AUTO_SYNC_TIMEOUT_MS} ms; kept. Until a replica ` +
          'catches up, a failover may lose locks granted now (replicaSync: auto; warned at most every 10 s).',
      );
    }
    return 'synced';
  }

  /** WAIT's answer; rejects when the master did not give one. */
  private waitOnce(node: Redis, replicas: number, timeout: number): Promise<number> {
    const bound = timeout + this.operationTimeout;
    return bounded(waitForReplicas(node, replicas, timeout), bound, { name: 'replica sync' });
  }
}
