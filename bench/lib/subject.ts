/**
 * The library under test as users get it: the compiled package (`dist/lib`, which `npm run bench`
 * builds first), not the TypeScript sources through tsx. The peers are measured as the JavaScript
 * their packages ship, so ours is too (tsx's transform adds helpers of its own to every closure).
 */
import type * as Library from '../../lib/internal';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const built = require('../../dist/lib/internal') as typeof Library;

export const { LockClient, RedisPubSub, RedLock, lockKeys, createLockClient, engineOf } = built;
export type LockClient = Library.LockClient;
export type RedLock = Library.RedLock;
export type RedisPubSub = Library.RedisPubSub;
