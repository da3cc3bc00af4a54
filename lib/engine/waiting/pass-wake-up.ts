import type { EngineContext } from '../client/engine-context';
import type { LockKeys } from '../redis/keys';
import { PASS_WAKE } from '../scripts/catalog';

/**
 * This process leaves the waiting registry of the lock with `keys` and, the lock being free, wakes the
 * next waiting process (lua/pass-wake-4.lua): a wake-up is never spent on a process that no longer waits.
 */
export function passWakeUp(engine: EngineContext, keys: LockKeys): Promise<unknown> {
  const { redis, clientId, publishCommand } = engine;
  return PASS_WAKE.run(redis, keys, { clientId, publish: publishCommand, message: 'released' });
}
