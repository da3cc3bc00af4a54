import { LockOptionsError } from '../engine/errors';

/**
 * A RedisLockBoardModule option that cannot be used, raised by `forRoot` before the application starts:
 * above all a board with neither a `guard` nor `public: true`, which would show every lock to anyone.
 */
export class LockBoardOptionsError extends LockOptionsError {}
