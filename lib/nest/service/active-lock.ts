import type { LockContext } from '../../engine/holds/lock-handle';
import type { LockKind } from './lock-service.options';

/**
 * The lock a decorated handler or method, or a `LockService.withLock` callback, runs under: what
 * `@CurrentLock()` and `LockService.current()` return.
 * @example
 * @Put(':id')
 * @DistributedLock({ key: 'article:{params.id}' })
 * update(@Param('id') id: string, @CurrentLock() lock: ActiveLock) {
 *   return this.articles.update(id, { fencingToken: lock.fencingToken, signal: lock.signal });
 * }
 */
export interface ActiveLock extends LockContext {
  /** The lock name (the rendered key template); several names joined by `+`. */
  readonly name: string;
  /** Every name locked, in the order given (one, unless the key was a list). */
  readonly names: readonly string[];
  /** The lock kind; `semaphore` for a permit (`permits`), `read` / `write` for a read-write lock (`mode`). */
  readonly kind: LockKind | 'semaphore' | 'read' | 'write';
  /**
   * The fencing token of each name, in `names` order; a RedLock's, one per master. `fencingToken` is
   * the first of them: with several names, pass each resource its own.
   */
  readonly fencingTokens: readonly (number | null)[];
}
