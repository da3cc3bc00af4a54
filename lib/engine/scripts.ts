import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { ChainableCommander } from 'ioredis';
import type { RedisClient } from './redis-client';

/**
 * Loads every `lua/<name>-<numberOfKeys>.lua` once per process (`-n`: a variable number of keys) and
 * registers it on each client with ioredis `defineCommand` (EVALSHA with a NOSCRIPT fallback is then
 * ioredis's job). The command name carries a hash of the script, so two versions of this library
 * sharing one client never collide.
 */
export type ScriptName = 'lock' | 'unlock' | 'renew-many' | 'force-unlock';

interface LoadedScript {
  readonly commandName: string;
  /** undefined: variable, passed with each call. */
  readonly numberOfKeys: number | undefined;
  readonly source: string;
}

let loaded: Map<string, LoadedScript> | undefined;
const registered = new WeakSet<object>();

function findLuaDir(): string {
  for (let dir = __dirname; ; dir = dirname(dir)) {
    const candidate = join(dir, 'lua');
    if (existsSync(join(candidate, 'lock-4.lua'))) return candidate;
    if (dirname(dir) === dir) throw new Error(`Cannot find the lua/ scripts directory above ${__dirname}.`);
  }
}

function loadScripts(): Map<string, LoadedScript> {
  if (loaded) return loaded;
  const dir = findLuaDir();
  loaded = new Map();
  for (const file of readdirSync(dir)) {
    const match = /^(.+)-(\d+|n)\.lua$/.exec(file);
    if (!match) continue;
    const [, name, keys] = match;
    const source = withIncludes(dir, file, readFileSync(join(dir, file), 'utf8'));
    const hash = createHash('sha1').update(source).digest('hex').slice(0, 10);
    loaded.set(name, {
      commandName: `redisLock_${name.replace(/-/g, '_')}_${hash}`,
      numberOfKeys: keys === 'n' ? undefined : Number(keys),
      source,
    });
  }
  return loaded;
}

/**
 * Replaces each `--!include <file>` line with `lua/include/<file>`: helpers several scripts share
 * (Redis runs each script alone, so they are assembled here, before the script is hashed). Includes
 * may include others; each file is inlined once, where it is first named.
 */
function withIncludes(dir: string, file: string, source: string, included = new Set<string>()): string {
  return source.replace(/^--!include (\S+)$/gm, (_line, include: string) => {
    if (included.has(include)) return `-- (${include}: included above)`;
    included.add(include);
    const path = join(dir, 'include', include);
    if (!existsSync(path)) throw new Error(`lua/${file} includes ${include}, which is missing from lua/include/.`);
    return withIncludes(dir, file, readFileSync(path, 'utf8').trimEnd(), included);
  });
}

function script(name: string): LoadedScript {
  const found = loadScripts().get(name);
  if (!found) throw new Error(`Lua script "${name}" is missing from lua/.`);
  return found;
}

/** Registers all scripts on the client (idempotent). */
export function registerScripts(client: RedisClient): void {
  if (registered.has(client)) return;
  for (const { commandName, numberOfKeys, source } of loadScripts().values()) {
    client.defineCommand(commandName, numberOfKeys === undefined ? { lua: source } : { numberOfKeys, lua: source });
  }
  registered.add(client);
}

type ScriptArg = string | number;

/** Runs a registered script on a client. */
export function runScript<T>(
  client: RedisClient,
  name: ScriptName | string,
  keys: string[],
  args: ScriptArg[],
): Promise<T> {
  registerScripts(client);
  const loaded = script(name);
  const command = (client as unknown as Record<string, (...a: ScriptArg[]) => Promise<T>>)[loaded.commandName];
  return command.call(client, ...scriptArguments(name, loaded, keys, args));
}

/** What the defined command takes: the keys (preceded by their count for a variable-keys script), then the args. */
function scriptArguments(name: string, { numberOfKeys }: LoadedScript, keys: string[], args: ScriptArg[]): ScriptArg[] {
  if (numberOfKeys === undefined) return [keys.length, ...keys, ...args];
  if (keys.length !== numberOfKeys) throw new Error(`Script "${name}" takes ${numberOfKeys} keys, got ${keys.length}.`);
  return [...keys, ...args];
}

/** Queues a registered script on a pipeline (the client must have had `registerScripts`). */
export function queueScript(
  pipeline: ChainableCommander,
  name: ScriptName | string,
  keys: string[],
  args: ScriptArg[],
): void {
  const loaded = script(name);
  const command = (pipeline as unknown as Record<string, (...a: ScriptArg[]) => unknown>)[loaded.commandName];
  command.call(pipeline, ...scriptArguments(name, loaded, keys, args));
}
