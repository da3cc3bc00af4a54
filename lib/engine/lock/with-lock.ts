import type { LockLogger } from '../util/logger';

/** What `withLock` holds: a lock handle, a group's handle, or the Nest layer's hold. */
export interface Releasable {
  release(): Promise<unknown>;
}

/** Where a failed release is reported, and under which lock name. */
export interface ReleaseReport<H> {
  logger: LockLogger;
  nameOf: (held: H) => string;
}

/**
 * Acquires, runs `work` holding the lock and releases it however `work` ends: the one `withLock` of
 * every lock kind, group and the Nest layer (each opens the lock scope around it). The work's result
 * or error is what the caller gets; a release that fails is logged as a warning naming the lock (its
 * lease runs out by itself).
 */
export async function withLock<H extends Releasable, T>(
  acquire: () => Promise<H>,
  work: (held: H) => Promise<T> | T,
  report: ReleaseReport<H>,
): Promise<T> {
  const held = await acquire();
  let failed = false;
  try {
    return await work(held);
  } catch (error) {
    failed = true;
    throw error;
  } finally {
    await held.release().catch((error: Error) => warnReleaseFailed(report.logger, report.nameOf(held), error, failed));
  }
}

/** A release that failed: the work's outcome stands and the lease runs out by itself. */
export function warnReleaseFailed(logger: LockLogger, name: string, error: Error, afterFailure = false): void {
  logger.warn(`Could not release lock "${name}"${afterFailure ? ' after a failure' : ''}: ${error.message}`);
}
