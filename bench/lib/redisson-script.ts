import { randomUUID } from 'node:crypto';
import type Redis from 'ioredis';
import { sleep } from '../../scripts/tooling';
import type { Contender, Release } from './contenders';

/**
 * The floor of a Redisson-style reentrant lock on one connection: the two scripts Redisson's RLock
 * runs (a hash of owner -> hold count with PEXPIRE; a release that counts down, deletes and
 * publishes), written here after what those scripts do, and called with nothing around them: no
 * fencing counter, waiting registry, operation bound, watchdog or record of the hold. Measured in the
 * uncontended scenario only, as the least latency a lock of this data structure can have on this
 * machine; a refused attempt simply retries after 5 ms, which that scenario never needs.
 */
const LOCK = `if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
return redis.call('pttl', KEYS[1])`;

const UNLOCK = `if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then return nil end
if redis.call('hincrby', KEYS[1], ARGV[1], -1) > 0 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  return 0
end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], '0')
return 1`;

const LEASE_MS = 30_000;
const RETRY_MS = 5;

interface RedissonCommands {
  redissonLock(lock: string, leaseMs: number, owner: string): Promise<number | null>;
  redissonUnlock(lock: string, channel: string, owner: string, leaseMs: number): Promise<number | null>;
}

export class RedissonScript implements Contender {
  readonly id = 'redisson-script' as const;
  readonly giveUps = 0;
  private readonly commands: RedissonCommands;
  /** Redisson's owner id: the client's UUID and a thread id (here one per acquisition). */
  private readonly client = randomUUID();
  private acquisitions = 0;

  constructor(redis: Redis) {
    redis.defineCommand('redissonLock', { numberOfKeys: 1, lua: LOCK });
    redis.defineCommand('redissonUnlock', { numberOfKeys: 2, lua: UNLOCK });
    this.commands = redis as unknown as RedissonCommands;
  }

  async acquire(key: string, signal?: AbortSignal): Promise<Release> {
    const lock = `redisson:{${key}}`;
    const owner = `${this.client}:${++this.acquisitions}`;
    while ((await this.commands.redissonLock(lock, LEASE_MS, owner)) !== null) {
      signal?.throwIfAborted();
      await sleep(RETRY_MS);
    }
    return () => this.commands.redissonUnlock(lock, `${lock}:channel`, owner, LEASE_MS);
  }

  async ready(): Promise<void> {}

  async close(): Promise<void> {}
}
