import { LockError } from './lock-error';

/**
 * RedLock could not reach a majority of its independent masters (down or unreachable, or kept out of
 * the vote after a restart: RedLockOptions.restartQuarantine), so no acquisition was possible. Nothing
 * is left locked on the masters that did answer.
 */
export class LockQuorumError extends LockError {
  constructor(
    key: string,
    readonly reachable: number,
    readonly quorum: number,
    readonly instances: number,
    cause?: unknown,
    /** Masters that answered but were kept out after a restart (not counted in `reachable`). */
    readonly keptOut = 0,
  ) {
    super(
      `RedLock "${key}": only ${reachable} of ${instances} Redis masters answered` +
        (keptOut > 0
          ? ` and may vote (${keptOut} more kept out by restartQuarantine: restarted too recently, or their start not read)`
          : '') +
        `, ${quorum} are needed. Bring the masters back or lower the number of instances the lock spans.`,
      key,
      { cause },
    );
  }
}
