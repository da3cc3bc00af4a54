import { AsyncLocalStorage } from 'node:async_hooks';
import { randomUUID } from 'node:crypto';

/**
 * Node has no threads, so Redisson's `clientId:threadId` owner becomes `clientId:scopeId`, where the
 * scope follows one async call chain (AsyncLocalStorage). Nested calls in the chain share the scope
 * and re-enter; two concurrent requests run in different scopes and exclude each other.
 */
export interface OwnerScope {
  readonly id: string;
}

const storage = new AsyncLocalStorage<OwnerScope>();

export function currentScope(): OwnerScope | undefined {
  return storage.getStore();
}

/**
 * Runs `fn` in a lock-owner scope: the current one if there is one (so locks taken inside re-enter
 * locks taken outside), else a new one. Pass `{ newScope: true }` to isolate parallel branches of
 * one request from each other.
 */
export function runInLockScope<T>(fn: () => T, options: { newScope?: boolean } = {}): T {
  const existing = storage.getStore();
  if (existing && !options.newScope) return fn();
  return storage.run({ id: randomUUID() }, fn);
}
