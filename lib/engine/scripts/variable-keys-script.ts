import type { ChainableCommander } from 'ioredis';
import type { RedisClient } from '../redis/redis-client';
import { loadedScript, queueScriptCall, sendScript, type LoadedScript, type ScriptArg } from './loader';
import { asIs } from './lua-script';

/** A script taking any number of keys (`-n.lua`), laid out by its caller. */
export class VariableKeysScript<R> {
  private loaded?: LoadedScript;

  constructor(
    readonly file: string,
    private readonly reply: (raw: unknown) => R,
  ) {}

  run(redis: RedisClient, keys: readonly string[], args: readonly ScriptArg[]): Promise<R> {
    const sent = sendScript<unknown>(redis, this.script, [this.script.sha, keys.length, ...keys, ...args]);
    return this.reply === asIs ? (sent as Promise<R>) : sent.then(this.reply);
  }

  /** Queues a call on a pipeline whose client has the scripts registered; its reply is the pipeline's. */
  queue(pipeline: ChainableCommander, keys: readonly string[], args: readonly ScriptArg[]): void {
    queueScriptCall(pipeline, this.script, [keys.length, ...keys, ...args]);
  }

  private get script(): LoadedScript {
    return (this.loaded ??= loadedScript(this.file));
  }
}
