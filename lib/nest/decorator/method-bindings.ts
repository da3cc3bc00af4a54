import type { LockService } from '../service/lock.service';

/**
 * Which application's LockService a decorated method locks with. The decorator wraps the method on
 * its class (so every reference to it, taken by any explorer at any time, locks); which Redis that
 * call uses depends on the instance, as two applications in one process each have their own.
 * The explorer binds each instance at bootstrap.
 */
const byInstance = new WeakMap<object, LockService>();
/** Request-scoped and transient providers: bound by class (unambiguous when one application has it). */
const byClass = new Map<object, Set<LockService>>();
/** Explorers created but not yet run: a decorated method called from another provider's onModuleInit runs them. */
const pending = new Set<{ explore(): void }>();

export const methodBindings = {
  bindInstance(instance: object, locks: LockService): void {
    byInstance.set(instance, locks);
  },
  unbindInstance(instance: object, locks: LockService): void {
    if (byInstance.get(instance) === locks) byInstance.delete(instance);
  },
  bindClass(classRef: object, locks: LockService): void {
    let services = byClass.get(classRef);
    if (!services) byClass.set(classRef, (services = new Set()));
    services.add(locks);
  },
  unbindClass(classRef: object, locks: LockService): void {
    const services = byClass.get(classRef);
    services?.delete(locks);
    if (services?.size === 0) byClass.delete(classRef);
  },
  addPending(explorer: { explore(): void }): void {
    pending.add(explorer);
  },
  removePending(explorer: { explore(): void }): void {
    pending.delete(explorer);
  },

  /** The LockService `instance` is bound to, running pending explorers if it is not bound yet. */
  lockServiceOf(instance: object): LockService | undefined {
    const found = lookup(instance);
    if (found || pending.size === 0) return found;
    for (const explorer of [...pending]) explorer.explore();
    return lookup(instance);
  },
};

function lookup(instance: object): LockService | undefined {
  const bound = byInstance.get(instance);
  if (bound) return bound;
  const services = byClass.get((instance as { constructor?: object }).constructor ?? {});
  return services?.size === 1 ? services.values().next().value : undefined;
}
