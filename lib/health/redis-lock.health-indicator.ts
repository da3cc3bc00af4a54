import { Inject, Injectable } from '@nestjs/common';
import { HealthIndicatorService, type HealthIndicatorResult } from '@nestjs/terminus';
import { LockClient } from '../engine/client/lock-client';

/**
 * A `@nestjs/terminus` health indicator for the lock module's client: up when the lock connection
 * answers PING, the subscriber is not cut off and the watchdog renews on schedule (see
 * `LockClient.health()`); the details of each part are in the response either way. Provide it next
 * to `TerminusModule` (the lock module is global, so its client is injectable anywhere).
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
  ) {}

  /** `key` names this check in the response (default `redis-lock`). */
  async isHealthy<const Key extends string = 'redis-lock'>(
    key: Key = 'redis-lock' as Key,
  ): Promise<HealthIndicatorResult<Key>> {
    const session = this.indicators.check(key);
    const { healthy, redis, subscriber, watchdog } = await this.client.health();
    const details = { redis, subscriber, watchdog };
    return healthy ? session.up(details) : session.down(details);
  }
}
