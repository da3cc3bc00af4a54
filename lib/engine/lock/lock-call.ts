/**
 * One `lock()` or `tryLock()` call: the same object across the waits it makes anew after a failover,
 * so a kind keys by it what those waits share (FairLock its wait, WriteLock its wait id). Handed along
 * explicitly: an AsyncLocalStorage would do it too, but on Node 20 and 22 its first use installs
 * promise hooks that every promise of the process pays from then on.
 */
export class LockCall {
  /** Only a LockCall is one (a class with no members would match any object). */
  declare private readonly nominal: never;
}
