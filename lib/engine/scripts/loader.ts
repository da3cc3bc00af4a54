import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { ChainableCommander } from 'ioredis';
import type { RedisClient } from '../redis-client';

/**
 * Loads every `lua/<name>-<numberOfKeys>.lua` once per process (`-n`: a variable number of keys),
 * assembling its includes, and registers it on each client with ioredis `defineCommand` (EVALSHA with
 * a NOSCRIPT fallback is then ioredis's job). The command name carries a hash of the script, so two
 * versions of this library sharing one client never collide.
 */
export interface LoadedScript {
  /** The file, e.g. `lock-4.lua`. */
  readonly file: string;
  readonly commandName: string;
  /** undefined: variable, passed with each call. */
  readonly numberOfKeys: number | undefined;
  /** The script as Redis runs it, includes assembled. */
  readonly source: string;
}

export type ScriptArg = string | number;

let loaded: Map<string, LoadedScript> | undefined;
const registered = new WeakSet<object>();

function findLuaDir(): string {
  for (let dir = __dirname; ; dir = dirname(dir)) {
    const candidate = join(dir, 'lua');
    if (existsSync(join(candidate, 'lock-4.lua'))) return candidate;
    if (dirname(dir) === dir) throw new Error(`Cannot find the lua/ scripts directory above ${__dirname}.`);
  }
}

/** Every script of lua/, by file name. */
export function loadScripts(): ReadonlyMap<string, LoadedScript> {
  if (loaded) return loaded;
  const dir = findLuaDir();
  loaded = new Map();
  for (const file of readdirSync(dir)) {
    const match = /^(.+)-(\d+|n)\.lua$/.exec(file);
    if (!match) continue;
    const [, name, keys] = match;
    const source = withIncludes(dir, file, readFileSync(join(dir, file), 'utf8'));
    const hash = createHash('sha1').update(source).digest('hex').slice(0, 10);
    loaded.set(file, {
      file,
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

/** The loaded script of `file` (e.g. `lock-4.lua`). */
export function loadedScript(file: string): LoadedScript {
  const found = loadScripts().get(file);
  if (!found) throw new Error(`Lua script "${file}" is missing from lua/.`);
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

type Command<T> = (...argv: ScriptArg[]) => Promise<T>;

/** Sends a registered script's defined command: `argv` is the keys (after their count for a `-n` script), then the args. */
export function sendScript<T>(client: RedisClient, script: LoadedScript, argv: ScriptArg[]): Promise<T> {
  registerScripts(client);
  return (client as unknown as Record<string, Command<T>>)[script.commandName].apply(client, argv);
}

/** Queues a registered script on a pipeline (its client must have had `registerScripts`). */
export function queueScriptCall(pipeline: ChainableCommander, script: LoadedScript, argv: ScriptArg[]): void {
  (pipeline as unknown as Record<string, Command<unknown>>)[script.commandName].apply(pipeline, argv);
}

/**
 * Runs a script with positional, unchecked keys and arguments: for the tests that send malformed
 * input on purpose to see the script refuse it. The library calls scripts through their typed
 * declarations (see catalog.ts).
 */
export function runScriptUnchecked<T>(client: RedisClient, file: string, keys: string[], args: unknown[]): Promise<T> {
  const script = loadedScript(file);
  const argv = [...(script.numberOfKeys === undefined ? [keys.length] : []), ...keys, ...args] as ScriptArg[];
  return sendScript<T>(client, script, argv);
}
