import type { RedisClient } from '../redis/redis-client';
import { loadedScript, sendScript, type LoadedScript, type ScriptArg } from './loader';

/** The type of one script argument, as `defineScript` declares it (a marker: it holds no value). */
export interface Arg<T extends ScriptArg> {
  readonly __argType?: T;
}

/** Declares an argument of type T. */
export function arg<T extends ScriptArg>(): Arg<T> {
  return {};
}

export const num = arg<number>();
export const str = arg<string>();

type ArgValues<S> = { [P in keyof S]: S[P] extends Arg<infer T> ? T : never };

/** A script's contract: its file, the keys it takes by name, its arguments by name and in order, and its reply. */
export interface ScriptSpec<K extends string, S extends Record<string, Arg<ScriptArg>>, R> {
  /** The file in lua/, e.g. `lock-4.lua`; the number is how many keys it takes. */
  file: string;
  /** The keys, in KEYS order, named as the kind's keys object names them (see keys.ts). */
  keys: readonly K[];
  /** The arguments, in ARGV order, with their types. */
  args: S;
  /** Turns the raw reply into the declared one (`asIs` when it already is). */
  reply: (raw: unknown) => R;
}

/**
 * A Lua script called by name: `run(redis, this.keys, { leaseMs, owner })` picks the keys it takes
 * from the kind's keys object and lays keys and arguments out in the script's order, so no call site
 * depends on a position.
 */
export class LuaScript<K extends string, A, R> {
  private loaded?: LoadedScript;
  private readonly argNames: readonly string[];

  constructor(private readonly spec: ScriptSpec<K, Record<string, Arg<ScriptArg>>, R>) {
    const declared = /-(\d+)\.lua$/.exec(spec.file);
    if (!declared || Number(declared[1]) !== spec.keys.length) {
      throw new Error(`${spec.file} is declared with ${spec.keys.length} keys: its name must end in -<that>.lua.`);
    }
    this.argNames = Object.keys(spec.args);
  }

  get file(): string {
    return this.spec.file;
  }

  get keyNames(): readonly K[] {
    return this.spec.keys;
  }

  get argNamesInOrder(): readonly string[] {
    return this.argNames;
  }

  run(redis: RedisClient, keys: Readonly<Record<K, string>>, args: A): Promise<R> {
    const sent = sendScript<unknown>(redis, this.script, this.evalshaArgs(keys, args));
    return this.spec.reply === asIs ? (sent as Promise<R>) : sent.then(this.spec.reply);
  }

  private get script(): LoadedScript {
    return (this.loaded ??= loadedScript(this.spec.file));
  }

  /** EVALSHA's arguments: the SHA, the key count, the keys, the args (see sendScript). */
  private evalshaArgs(keys: Readonly<Record<K, string>>, args: A): ScriptArg[] {
    const names = this.spec.keys;
    const argv: ScriptArg[] = new Array(2 + names.length + this.argNames.length);
    argv[0] = this.script.sha;
    argv[1] = names.length;
    let i = 2;
    for (const name of names) argv[i++] = keys[name];
    for (const name of this.argNames) argv[i++] = (args as Record<string, ScriptArg>)[name];
    return argv;
  }
}

/** Declares a script (see ScriptSpec). */
export function defineScript<K extends string, S extends Record<string, Arg<ScriptArg>>, R>(
  spec: ScriptSpec<K, S, R>,
): LuaScript<K, ArgValues<S>, R> {
  return new LuaScript<K, ArgValues<S>, R>(spec);
}

/** The reply is already of the declared type (no conversion, no extra promise). */
export function asIs<R>(raw: unknown): R {
  return raw as R;
}

/** A yes/no reply: 1 is yes. */
export function yesNo(raw: unknown): boolean {
  return raw === 1;
}
