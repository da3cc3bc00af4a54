import { Inject, Injectable } from '@nestjs/common';
import { HealthIndicatorService, type HealthIndicatorResult } from '@nestjs/terminus';
import { LockClient } from '../engine/client/lock-client';
import type { LockClientHealth } from '../engine/client/client-health';
import { RedLockMasters } from '../nest/module/lock-client.provider';

/** The module's RedLock masters (`redLock.masters`), in the response when it has them. */
export interface RedLockHealth {
  /** A majority of the masters is healthy: RedLock can still grant. */
  healthy: boolean;
  /** How many healthy masters a grant needs (a majority). */
  quorum: number;
  healthyMasters: number;
  /** Each master's client, in the order of `redLock.masters`. */
  masters: LockClientHealth[];
}

/**
 * A `@nestjs/terminus` health indicator for the lock module's client: up when the lock connection
 * answers PING, the subscriber is not cut off and the watchdog renews on schedule (see
 * `LockClient.health()`); the details of each part are in the response either way. With RedLock
 * masters configured (`redLock.masters`), up also needs a majority of them healthy (RedLock grants on
 * a majority: one master down of five is in the details, not a failed check), and the details have
 * each master's. Provide it next to `TerminusModule` (the lock module is global, so its client is
 * injectable anywhere).
 * @example
 * @Controller('health')
 * class HealthController {
 *   constructor(private readonly health: HealthCheckService, private readonly locks: RedisLockHealthIndicator) {}
 *
 *   @Get() @HealthCheck()
 *   check() {
 *     return this.health.check([() => this.locks.isHealthy()]);
 *   }
 * }
 */
@Injectable()
export class RedisLockHealthIndicator {
  constructor(
    @Inject(HealthIndicatorService) private readonly indicators: HealthIndicatorService,
    @Inject(LockClient) private readonly client: LockClient,
    @Inject(RedLockMasters) private readonly redLockMasters: RedLockMasters,
  ) {}

  /** `key` names this check in the response (default `redis-lock`). */
  async isHealthy<const Key extends string = 'redis-lock'>(
    key: Key = 'redis-lock' as Key,
  ): Promise<HealthIndicatorResult<Key>> {
    const session = this.indicators.check(key);
    const [{ healthy, redis, subscriber, watchdog }, redLock] = await Promise.all([
      this.client.health(),
      this.redLockHealth(),
    ]);
    const details: Omit<LockClientHealth, 'healthy'> & { redLock?: RedLockHealth } = {
      redis,
      subscriber,
      watchdog,
    };
    if (redLock) details.redLock = redLock;
    return healthy && (redLock?.healthy ?? true) ? session.up(details) : session.down(details);
  }

  private async redLockHealth(): Promise<RedLockHealth | undefined> {
    const { clients } = this.redLockMasters;
    if (clients.length === 0) return undefined;
    const masters = await Promise.all(clients.map((client) => client.health()));
    const quorum = Math.floor(clients.length / 2) + 1;
    const healthyMasters = masters.filter((master) => master.healthy).length;
    return { healthy: healthyMasters >= quorum, quorum, healthyMasters, masters };
  }
}
