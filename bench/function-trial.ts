/**
 * Side trial: what the reentrant lock's two scripts would cost Redis as a Redis Functions library
 * (FUNCTION LOAD once, FCALL per call) instead of EVALSHA. An EVALSHA runs the whole script body at
 * every call, so every helper it defines (lua/include/) is created again each time; a library defines
 * them once, when it is loaded, and each FCALL runs only its function.
 *
 *   npx tsx bench/function-trial.ts <port> [pairs] [--sequential]
 *
 * against a redis-server 7+ already running on <port> that may be flushed (e.g. `npm run redis:up`,
 * port 7400). Prints Redis µs per uncontended acquire + release (INFO commandstats, fresh keys, the two
 * calls pipelined together, or all of a batch with no --sequential), EVALSHA and FCALL in alternation.
 * The library here is built for this trial only: the scripts' includes at its top level, each script a
 * function, and the per-call record cache of hold-ids.lua made anew by each call.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import Redis from 'ioredis';
import { loadScripts } from '../lib/engine/scripts/loader';

const LUA_DIR = join(__dirname, '..', 'lua');

/** `files` as one library: their includes once, at the top; each file a function named after it. */
function libraryOf(name: string, files: string[]): string {
  const included = new Set<string>();
  const top: string[] = [];
  const inline = (source: string): string =>
    source.replace(/^--!include (\S+)$/gm, (_line, file: string) => {
      if (!included.has(file)) {
        included.add(file);
        top.push(inline(readFileSync(join(LUA_DIR, 'include', file), 'utf8')));
      }
      return '';
    });
  const functions = files.map((file) => {
    const body = inline(readFileSync(join(LUA_DIR, file), 'utf8').replace(/^#!lua.*$/m, ''));
    return `redis.register_function('${functionName(file)}', function(KEYS, ARGV)\nseenHolds = {}\n${body}\nend)`;
  });
  const helpers = top.join('\n').replace('local seenHolds = {}', 'local seenHolds');
  return `#!lua name=${name}\n${helpers}\n${functions.join('\n')}`;
}

const functionName = (file: string) => file.replace(/[-.]/g, '_');

async function main(): Promise<void> {
  const port = Number(process.argv[2]);
  const pairs = Number(process.argv[3] ?? 20_000);
  const batch = process.argv.includes('--sequential') ? 1 : 500;
  const redis = new Redis({ port, host: '127.0.0.1' });
  const admin = new Redis({ port, host: '127.0.0.1' });
  await redis.call('FUNCTION', 'LOAD', 'REPLACE', libraryOf('lockfunctiontrial', ['lock-5.lua', 'unlock-6.lua']));
  const scripts = loadScripts();
  const lockSha = String(await redis.script('LOAD', scripts.get('lock-5.lua')!.source));
  const unlockSha = String(await redis.script('LOAD', scripts.get('unlock-6.lua')!.source));
  const owner = `${'o'.repeat(36)}:1`;
  const client = 'c'.repeat(36);
  for (let round = 0; round < 4; round++) {
    const line: string[] = [];
    for (const mode of ['evalsha', 'fcall', 'evalsha', 'fcall'] as const) {
      await admin.flushall();
      await admin.config('RESETSTAT');
      for (let from = 0; from < pairs; from += batch) {
        const pipeline = redis.pipeline();
        for (let i = from; i < from + batch; i++) {
          const lock = `trial:{${mode}:${round}:${i}}`;
          const [fence, waiting, next, grants] = ['fence', 'waiting', 'next', 'grants'].map((s) => `${lock}:${s}`);
          const holdId = `hold-${i}`;
          const lockCall = [5, lock, fence, waiting, next, grants, 30_000, owner, client, '-', holdId, 60_000];
          const unlockKeys = [lock, `${lock}:unlock`, waiting, next, grants, fence];
          const unlockCall = [6, ...unlockKeys, owner, holdId, 30_000, 'publish', 'm', 'pass', client, 'one', 10];
          if (mode === 'evalsha') {
            pipeline.call('EVALSHA', lockSha, ...lockCall).call('EVALSHA', unlockSha, ...unlockCall);
          } else {
            pipeline.call('FCALL', functionName('lock-5.lua'), ...lockCall);
            pipeline.call('FCALL', functionName('unlock-6.lua'), ...unlockCall);
          }
        }
        const failed = (await pipeline.exec())?.find(([error]) => error);
        if (failed) throw failed[0];
      }
      const stats = await admin.info('commandstats');
      const [, calls, usec] = new RegExp(`cmdstat_${mode}:calls=(\\d+),usec=(\\d+)`).exec(stats) ?? [];
      line.push(`${mode} ${((2 * Number(usec)) / Number(calls)).toFixed(1)} µs`);
    }
    console.log(`round ${round + 1}: ${line.join('  ')} per acquire + release`);
  }
  await redis.call('FUNCTION', 'DELETE', 'lockfunctiontrial');
  redis.disconnect();
  admin.disconnect();
}

void main();
