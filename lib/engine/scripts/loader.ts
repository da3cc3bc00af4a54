import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { ChainableCommander } from 'ioredis';
import type { RedisClient } from '../redis/redis-client';

/**
 * Loads every `lua/<name>-<numberOfKeys>.lua` once per process (`-n`: a variable number of keys),
 * assembling its includes. A call is a plain EVALSHA (sendScript). Pipelines use the scripts
 * registered with ioredis `defineCommand` (registerScripts), under a name carrying a hash of the
 * script, so two versions of this library sharing one client never collide.
 */
export interface LoadedScript {
  /** The file, e.g. `lock-4.lua`. */
  readonly file: string;
  /** SHA1 of `source`, as EVALSHA names the script. */
  readonly sha: string;
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
    if (existsSync(join(candidate, 'lock-5.lua'))) return candidate;
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
    const sha = createHash('sha1').update(source).digest('hex');
    loaded.set(file, {
      file,
      sha,
      commandName: `redisLock_${name.replace(/-/g, '_')}_${sha.slice(0, 10)}`,
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

/**
 * Runs a script: `evalshaArgs` is the SHA, the key count, the keys, then the args. EVALSHA, and when
 * the server does not have the script (NOSCRIPT: a new server, a restart, a failover) EVAL with its
 * source, which loads it for the next calls. Not through `defineCommand`, which wraps every call in
 * a Command subclass of its own per script (one more promise and closure per call, and ioredis's
 * command code sees a new object shape for each script).
 */
export function sendScript<T>(client: RedisClient, script: LoadedScript, evalshaArgs: ScriptArg[]): Promise<T> {
  return (client.evalsha as Command<T>).apply(client, evalshaArgs).catch((error: Error) => {
    if (!error.message?.startsWith('NOSCRIPT')) throw error;
    const evalArgs = evalshaArgs.slice();
    evalArgs[0] = script.source;
    return (client.eval as Command<T>).apply(client, evalArgs);
  });
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
  return sendScript<T>(client, script, [script.sha, keys.length, ...keys, ...args] as ScriptArg[]);
}
