import { AsyncLocalStorage } from 'node:async_hooks';
import { randomUUID } from 'node:crypto';

/**
 * Node has no threads, so Redisson's `clientId:threadId` owner becomes `clientId:scopeId`, where the
 * scope follows one async call chain (AsyncLocalStorage). Nested calls in the chain share the scope
 * and re-enter; two concurrent requests run in different scopes and exclude each other.
 */
export interface OwnerScope {
  readonly id: string;
  /**
   * The owner given to the section this scope was opened for (`withLock(fn, { owner })`): the scope's
   * holds are that owner's, so a call from inside the section re-enters them as it would its own.
   */
  readonly owner?: string;
  /**
   * The section this scope was opened inside, whose holds it re-enters (under that section's owner);
   * its other locks it takes under its own. Set for a lock's section opened inside another section,
   * and for a MultiLock's opened inside a holder of some of its locks (see runAsCriticalSection's
   * `inherit`).
   */
  readonly parent?: OwnerScope;
}

const storage = new AsyncLocalStorage<OwnerScope>();

/** The owner `scope`'s holds are recorded under: its section's explicit one, else `<clientId>:<scope id>`. */
export function ownerOfScope(scope: OwnerScope, clientId: string): string {
  return scope.owner ?? `${clientId}:${scope.id}`;
}

export function currentScope(): OwnerScope | undefined {
  return storage.getStore();
}

/**
 * Runs `fn` in a lock-owner scope: the current one if there is one (so locks taken inside re-enter
 * locks taken outside), else a new one. Pass `{ newScope: true }` to isolate parallel branches of
 * one request from each other. For code that locks and unlocks by hand; `withLock` opens a critical
 * section instead (runAsCriticalSection).
 */
export function runInLockScope<T>(fn: () => T, options: { newScope?: boolean } = {}): T {
  const existing = storage.getStore();
  if (existing && !options.newScope) return fn();
  return storage.run({ id: randomUUID() }, fn);
}

/** For runAsCriticalSection's `inherit`: any section opened inside another is nested in it. */
export const nestedSection = (): boolean => true;

/**
 * Runs `fn` (an acquisition and the work it guards: a `withLock`, a decorated method) as a critical
 * section. It re-enters only from inside: when the current scope already holds the lock (`holds`),
 * `fn` runs in that scope; anywhere else it gets a scope, and so an owner, of its own. So sibling
 * branches of one request or job (`Promise.all([settle(7), settle(7)])`) exclude each other, as
 * Redisson's threads do, while a call made from inside the section re-enters. `newScope: true`: a
 * scope of its own even inside a holder (which then waits for itself). `inherit`: when the current
 * scope does not hold what the section takes, or holds only part of it (a MultiLock's locks), the
 * section gets a scope of its own whose parent is the current one: it re-enters the holds of the
 * parent (and of the parent's parents) under their owners and takes the rest under its own, so
 * sibling sections still exclude each other on the rest.
 */
export function runAsCriticalSection<T>(
  holds: (scope: OwnerScope) => boolean,
  fn: () => T,
  options: { newScope?: boolean; inherit?: (scope: OwnerScope) => boolean; owner?: string } = {},
): T {
  const existing = storage.getStore();
  // A section of an explicit owner runs as that owner: a scope carrying it, nested in the current one.
  if (options.owner !== undefined) {
    const parent = options.newScope ? undefined : existing;
    return storage.run({ id: randomUUID(), owner: options.owner, parent }, fn);
  }
  if (existing && !options.newScope && holds(existing)) return fn();
  if (existing && !options.newScope && options.inherit?.(existing)) {
    return storage.run({ id: randomUUID(), parent: existing }, fn);
  }
  return storage.run({ id: randomUUID() }, fn);
}
