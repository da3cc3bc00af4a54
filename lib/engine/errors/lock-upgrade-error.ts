import { LockError } from './lock-error';

/**
 * A write lock asked for by an owner that holds the read lock of the same read-write lock and not its
 * write lock. Refused at once, nothing changed: waiting would never end, since the owner's own read
 * hold keeps writers out (two such owners would wait for each other forever).
 */
export class LockUpgradeError extends LockError {
  constructor(
    key: string,
    readonly owner: string,
  ) {
    super(
      `Owner "${owner}" holds the read lock of "${key}" and asked for its write lock: a reader cannot upgrade. ` +
        'Release the read lock first, or take the write lock first and read under it.',
      key,
    );
  }
}
