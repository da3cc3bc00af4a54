import { randomUUID } from 'node:crypto';
import type Redis from 'ioredis';
import type { Contender, Release } from './contenders';

/**
 * The least a lock that wakes one waiting process per release can do: the fair lock's floor on the
 * hot keys of `npm run bench` (a floor, not a peer: see FLOORS), and a contender of the side trial
 * bench/cpu-per-process.ts. One waiter per process (a single wake-up slot). A refused process queues
 * itself in a list; a release pops the next process, reserves the free lock for it for a second and
 * publishes to that process alone, which takes the lock on the message. No owner scopes, re-entry,
 * fencing, watchdog, operation bounds, failover care or turns: what is left is the cost of moving a
 * lock to another process (two script calls, a message, a scheduler wake-up), to set ours against.
 */
export class HandOffFloor implements Contender {
  readonly id = 'hand-off-floor' as const;
  readonly giveUps = 0;
  private readonly me = randomUUID();
  private readonly subscriber: Redis;
  private wake?: () => void;
  /** A message that came while no acquisition was parked. */
  private woken = false;

  constructor(private readonly redis: Redis) {
    redis.defineCommand('floorAcquire', {
      numberOfKeys: 2,
      lua: `local v = redis.call('get', KEYS[1])
if v == false or v == 'r:' .. ARGV[1] then redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1 end
redis.call('lrem', KEYS[2], 0, ARGV[1])
redis.call('rpush', KEYS[2], ARGV[1])
return 0`,
    });
    redis.defineCommand('floorRelease', {
      numberOfKeys: 2,
      lua: `if redis.call('get', KEYS[1]) ~= ARGV[1] then return 0 end
local next = redis.call('lpop', KEYS[2])
if next then
  redis.call('set', KEYS[1], 'r:' .. next, 'PX', 1000)
  redis.call('publish', ARGV[2] .. next, '1')
else
  redis.call('del', KEYS[1])
end
return 1`,
    });
    this.subscriber = redis.duplicate();
    this.subscriber.on('message', () => {
      const wake = this.wake;
      this.wake = undefined;
      if (wake) wake();
      else this.woken = true;
    });
  }

  async ready(): Promise<void> {
    await this.subscriber.subscribe(`floor:wake:${this.me}`);
  }

  async acquire(key: string, signal?: AbortSignal): Promise<Release> {
    const keys = [`floor:{${key}}`, `floor:{${key}}:queue`];
    const commands = this.redis as unknown as FloorCommands;
    while ((await commands.floorAcquire(keys[0], keys[1], this.me, 30_000)) !== 1) {
      signal?.throwIfAborted();
      if (this.woken) {
        this.woken = false;
        continue;
      }
      // A second at most: a message lost with a restarted subscriber must not stall the trial.
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          signal?.removeEventListener('abort', done);
          this.wake = undefined;
          resolve();
        };
        const timer = setTimeout(done, 1_000);
        this.wake = done;
        signal?.addEventListener('abort', done, { once: true });
      });
    }
    return () => commands.floorRelease(keys[0], keys[1], this.me, 'floor:wake:');
  }

  async close(): Promise<void> {
    this.subscriber.disconnect();
  }
}

interface FloorCommands {
  floorAcquire(lock: string, queue: string, me: string, leaseMs: number): Promise<number>;
  floorRelease(lock: string, queue: string, me: string, channelPrefix: string): Promise<number>;
}
