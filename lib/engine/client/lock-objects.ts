/** How many names' lock objects a client keeps for reuse (per kind). */
const KEPT = 1_024;

/**
 * The lock objects of recently used names, so that `getLock(name)` in a loop (or per request, as
 * LockService does) makes its keys once and the releases the client remembers (RecentReleases)
 * share one object per name instead of keeping one each alive. A lock object holds no state of its
 * own beyond what it derives from its name, so sharing it is invisible to callers.
 */
export class LockObjects<T> {
  private readonly byName = new Map<string, T>();

  get(name: string, make: (name: string) => T): T {
    let lock = this.byName.get(name);
    if (lock === undefined) {
      lock = make(name); // checks the name: only valid names are kept
      if (this.byName.size >= KEPT) this.byName.delete(this.byName.keys().next().value as string);
      this.byName.set(name, lock);
    }
    return lock;
  }
}
