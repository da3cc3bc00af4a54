// `nestjs-redis-lock/health`: the parts that need `@nestjs/terminus` (an optional peer dependency),
// kept out of the main entry so applications without terminus never load it.
export { RedisLockHealthIndicator } from './redis-lock.health-indicator';
export type { RedLockHealth } from './redis-lock.health-indicator';
