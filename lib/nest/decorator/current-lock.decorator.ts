import { createParamDecorator } from '@nestjs/common';
import { currentLock } from '../service/active-lock.store';

/**
 * Injects the lock the handler runs under (`ActiveLock`: name, kind, signal, fencingToken, extend),
 * or undefined when there is none.
 * @example
 * @Post(':id/publish')
 * @DistributedLock({ key: 'article:{params.id}' })
 * publish(@Param('id') id: string, @CurrentLock() lock: ActiveLock) {
 *   return this.articles.publish(id, { fencingToken: lock.fencingToken, signal: lock.signal });
 * }
 */
export const CurrentLock = createParamDecorator(() => currentLock());
