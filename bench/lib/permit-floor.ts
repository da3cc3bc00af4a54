import { randomUUID } from 'node:crypto';
import type Redis from 'ioredis';
import { SHARED_LIMIT, type Contender, type Release } from './contenders';

/**
 * The least a FIFO semaphore whose release hands its permit over in the message can do: our
 * semaphore's floor in the shared-holders scenario (a floor, not a peer: see FLOORS). The holders are a
 * set; a refused acquisition queues itself in a list; a release takes its holder out, puts the next in
 * line in the set in its place and tells that acquisition's process alone, whose message is its grant.
 * No leases, fencing, watchdog, operation bounds, failover care or crash care: what is left is the cost
 * of moving a permit to another process (two script calls, a message, a scheduler wake-up).
 */
export class PermitFloor implements Contender {
  readonly id = 'permit-floor' as const;
  readonly giveUps = 0;
  private readonly process = randomUUID();
  private readonly subscriber: Redis;
  /** Waiting acquisitions of this process, by member: how to wake each. */
  private readonly parked = new Map<string, () => void>();
  /** Grants whose message came before their acquisition parked. */
  private readonly early = new Set<string>();

  constructor(private readonly redis: Redis) {
    redis.defineCommand('permitFloorAcquire', {
      numberOfKeys: 2,
      lua: `if redis.call('zscore', KEYS[1], ARGV[1]) then return 1 end
if redis.call('llen', KEYS[2]) == 0 and redis.call('zcard', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('zadd', KEYS[1], 0, ARGV[1])
  return 1
end
if not redis.call('lpos', KEYS[2], ARGV[1]) then redis.call('rpush', KEYS[2], ARGV[1]) end
return 0`,
    });
    redis.defineCommand('permitFloorRelease', {
      numberOfKeys: 2,
      // Also how an acquisition that gives up leaves: out of the queue, and any permit handed to it passed on.
      lua: `redis.call('lrem', KEYS[2], 0, ARGV[1])
if redis.call('zrem', KEYS[1], ARGV[1]) == 0 then return 0 end
local next = redis.call('lpop', KEYS[2])
if next then
  redis.call('zadd', KEYS[1], 0, next)
  redis.call('publish', ARGV[2] .. string.sub(next, 1, 36), next)
end
return 1`,
    });
    this.subscriber = redis.duplicate();
    this.subscriber.on('message', (_channel: string, member: string) => {
      const wake = this.parked.get(member);
      if (wake) wake();
      else this.early.add(member);
    });
  }

  async ready(): Promise<void> {
    await this.subscriber.subscribe(`permit-floor:wake:${this.process}`);
  }

  async acquire(key: string, signal?: AbortSignal): Promise<Release> {
    const keys = [`permit-floor:{${key}}`, `permit-floor:{${key}}:queue`] as const;
    const commands = this.redis as unknown as PermitFloorCommands;
    const member = `${this.process}:${randomUUID()}`;
    // A second at most per sleep: a lost message costs that, and the next call finds the permit handed over.
    while ((await commands.permitFloorAcquire(keys[0], keys[1], member, SHARED_LIMIT)) !== 1) {
      if (this.early.delete(member)) break; // the message is the grant
      const told = await new Promise<boolean>((resolve) => {
        const end = (heard: boolean) => {
          clearTimeout(timer);
          signal?.removeEventListener('abort', stop);
          this.parked.delete(member);
          resolve(heard);
        };
        const stop = () => end(false);
        const timer = setTimeout(stop, 1_000);
        this.parked.set(member, () => end(true));
        signal?.addEventListener('abort', stop, { once: true });
      });
      if (told) break;
      if (signal?.aborted) {
        await commands.permitFloorRelease(keys[0], keys[1], member, 'permit-floor:wake:');
        this.early.delete(member);
        throw signal.reason;
      }
    }
    return () => commands.permitFloorRelease(keys[0], keys[1], member, 'permit-floor:wake:');
  }

  async close(): Promise<void> {
    this.subscriber.disconnect();
  }
}

interface PermitFloorCommands {
  permitFloorAcquire(holders: string, queue: string, member: string, limit: number): Promise<number>;
  permitFloorRelease(holders: string, queue: string, member: string, channelPrefix: string): Promise<number>;
}
