import type { Module } from '@nestjs/core/injector/module';

/**
 * The RedisLockModules among `lockModules` whose providers `host` can inject, as Nest resolves them:
 * the module itself, one it imports (a global one is imported by every module), or one re-exported by
 * a module it imports (a shared module that imports and exports RedisLockModule).
 */
export function lockModulesVisibleFrom(host: Module, lockModules: readonly Module[]): Module[] {
  return lockModules.filter((lockModule) => host === lockModule || lockModule.isGlobal || imports(host, lockModule));
}

function imports(host: Module, target: Module, visited = new Set<Module>(), reExportsOnly = false): boolean {
  for (const child of host.imports) {
    // Past the host's own imports, only what a module exports reaches the host.
    if (!child || visited.has(child) || (reExportsOnly && !host.exports.has(child.metatype))) continue;
    visited.add(child);
    if (child === target || imports(child, target, visited, true)) return true;
  }
  return false;
}
