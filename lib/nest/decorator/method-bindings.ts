import type { RedisLockRuntime } from '../module/redis-lock.runtime';

/** What a method's wrapper runs when the instance is not bound yet: the explorers that have not run. */
interface Explorer {
  explore(): void;
}

/**
 * Which application a call of a decorated provider method belongs to. The decorator wraps the method
 * once, on its class (so every reference to it, taken by any explorer at any time, locks); which Redis
 * that call uses depends on the instance, as two applications in one process each have their own.
 * Each application's explorer binds its instances at bootstrap and unbinds them on shutdown.
 */
class MethodBindings {
  private readonly byInstance = new WeakMap<object, RedisLockRuntime>();
  /** Request-scoped and transient providers: bound by class (unambiguous when one application has it). */
  private readonly byClass = new Map<object, Set<RedisLockRuntime>>();
  /** Explorers created but not yet run: a decorated method called from another provider's onModuleInit runs them. */
  private readonly pending = new Set<Explorer>();

  bindInstance(instance: object, runtime: RedisLockRuntime): void {
    this.byInstance.set(instance, runtime);
  }

  unbindInstance(instance: object, runtime: RedisLockRuntime): void {
    if (this.byInstance.get(instance) === runtime) this.byInstance.delete(instance);
  }

  bindClass(classRef: object, runtime: RedisLockRuntime): void {
    let runtimes = this.byClass.get(classRef);
    if (!runtimes) this.byClass.set(classRef, (runtimes = new Set()));
    runtimes.add(runtime);
  }

  unbindClass(classRef: object, runtime: RedisLockRuntime): void {
    const runtimes = this.byClass.get(classRef);
    runtimes?.delete(runtime);
    if (runtimes?.size === 0) this.byClass.delete(classRef);
  }

  addPending(explorer: Explorer): void {
    this.pending.add(explorer);
  }

  removePending(explorer: Explorer): void {
    this.pending.delete(explorer);
  }

  /** The application `instance` is bound to, running pending explorers if it is not bound yet. */
  runtimeOf(instance: object): RedisLockRuntime | undefined {
    const found = this.lookup(instance);
    if (found || this.pending.size === 0) return found;
    for (const explorer of [...this.pending]) explorer.explore();
    return this.lookup(instance);
  }

  private lookup(instance: object): RedisLockRuntime | undefined {
    const bound = this.byInstance.get(instance);
    if (bound) return bound;
    const runtimes = this.byClass.get((instance as { constructor?: object }).constructor ?? {});
    return runtimes?.size === 1 ? runtimes.values().next().value : undefined;
  }
}

// The one process-wide object of the Nest layer, by nature: the wrapper it serves is shared by every
// application in the process, and all it holds is which application each instance belongs to.
export const methodBindings = new MethodBindings();
