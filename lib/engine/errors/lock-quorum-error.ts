import { LockError } from './lock-error';

/**
 * RedLock could not reach a majority of its independent masters (down or unreachable), so no
 * acquisition was possible. Nothing is left locked on the masters that did answer.
 */
export class LockQuorumError extends LockError {
  constructor(
    key: string,
    readonly reachable: number,
    readonly quorum: number,
    readonly instances: number,
    cause?: unknown,
  ) {
    super(
      `RedLock "${key}": only ${reachable} of ${instances} Redis masters answered, ${quorum} are needed. ` +
        'Bring the masters back or lower the number of instances the lock spans.',
      key,
      { cause },
    );
  }
}
