#!/usr/bin/env node
// `npx nestjs-redis-lock <command>`: see who holds a lock, list locks, force-unlock one. Connects with
// the same REDIS_* variables as lockOptionsFromEnv() (the Nest module's environment).
import { createInterface } from 'node:readline/promises';
import { lockOptionsFromEnv } from '../connection/env';
import { createLockClient } from '../connection/create-lock-client';
import { keyPattern, mastersOf, scanKeys, scanLockNames } from '../engine/redis/key-scan';
import type { LockClient } from '../engine/client/lock-client';
import { formatInspection } from './format';

const USAGE = `Usage: nestjs-redis-lock <command> [--json]

  inspect <name>             who holds the lock, the lease left, the fencing token, who waits
  list [pattern]             every lock whose name matches the glob pattern (default *), via SCAN
                             (on every master of a Cluster); names as stored: { } % percent-encoded
  unlock <name> --force      release the lock whoever holds it (asks first; --yes to skip)
  sweep [--dry-run]          give every key under the prefix that has no TTL (fencing counters and
                             semaphore limits left by versions before idleKeyTtl) the idle TTL

Connection and key prefix from REDIS_DEPLOY_TYPE, REDIS_URL, REDIS_NODES, REDIS_SENTINELS, … and
REDIS_LOCK_PREFIX, as the Nest module reads them. An unreachable Redis is given three times
REDIS_LOCK_OPERATION_TIMEOUT (default 3000 ms) to answer.`;

class UsageError extends Error {}

interface Args {
  command?: string;
  operand?: string;
  json: boolean;
  force: boolean;
  yes: boolean;
  dryRun: boolean;
}

function parse(argv: string[]): Args {
  const flags = new Set(argv.filter((a) => a.startsWith('--')));
  for (const flag of flags) {
    if (!['--json', '--force', '--yes', '--dry-run', '--help'].includes(flag)) {
      throw new UsageError(`Unknown option ${flag}.`);
    }
  }
  if (flags.has('--help')) throw new UsageError('');
  const [command, operand, ...rest] = argv.filter((a) => !a.startsWith('--'));
  if (rest.length > 0) throw new UsageError(`Unexpected argument ${rest[0]}.`);
  const [json, force, yes, dryRun] = ['--json', '--force', '--yes', '--dry-run'].map((flag) => flags.has(flag));
  return { command, operand, json, force, yes, dryRun };
}

/**
 * The keys under the client's prefix that have no TTL (none is written so now; earlier versions kept
 * fencing counters and semaphore limits forever), given `idleKeyTtl` unless `dryRun`. Returns them.
 */
async function sweep(client: LockClient, dryRun: boolean): Promise<string[]> {
  const forever: string[] = [];
  for (const node of mastersOf(client.redis)) {
    await scanKeys(node, keyPattern(client.redis, client.keyPrefix), async (keys) => {
      const pipeline = node.pipeline();
      keys.forEach((key) => pipeline.pttl(key));
      const ttls = (await pipeline.exec()) ?? [];
      const found = keys.filter((_, i) => ttls[i]?.[1] === -1);
      // PEXPIRE NX: a key that got a TTL meanwhile (a grant or a renewal) keeps it.
      if (!dryRun) await Promise.all(found.map((key) => node.call('pexpire', key, client.idleKeyTtl, 'NX')));
      forever.push(...found);
    });
  }
  return forever.sort();
}

async function confirm(question: string): Promise<boolean> {
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    return /^y(es)?$/i.test((await rl.question(question)).trim());
  } finally {
    rl.close();
  }
}

async function run(args: Args, out: (text: string) => void): Promise<number> {
  const { command, operand } = args;
  if (!command) throw new UsageError('');
  if (!['inspect', 'list', 'unlock', 'sweep'].includes(command)) throw new UsageError(`Unknown command ${command}.`);
  if (command !== 'list' && command !== 'sweep' && !operand) throw new UsageError(`${command} needs a lock name.`);
  if (command === 'unlock' && !args.force) {
    throw new UsageError('unlock releases a lock whoever holds it: pass --force to mean it.');
  }
  const locks = await createLockClient({ ...lockOptionsFromEnv(), telemetry: false, logger: quietLogger });
  try {
    if (command === 'inspect') {
      const seen = await locks.inspect(operand!);
      out(args.json ? JSON.stringify(seen, null, 2) : formatInspection(seen));
      return 0;
    }
    if (command === 'sweep') {
      const keys = await sweep(locks, args.dryRun);
      const done = args.dryRun ? 'would get' : 'got';
      if (args.json) out(JSON.stringify({ keys, ttlMs: locks.idleKeyTtl, applied: !args.dryRun }, null, 2));
      else
        out(
          keys.length === 0
            ? 'Every key has a TTL.'
            : `${keys.length} keys without a TTL ${done} ${locks.idleKeyTtl} ms:\n${keys.join('\n')}`,
        );
      return 0;
    }
    if (command === 'list') {
      const all = await Promise.all(
        (await scanLockNames(locks.redis, locks.keyPrefix, operand ?? '*')).map((name) => locks.inspect(name)),
      );
      const held = all.filter((i) => i.state !== 'free' || i.queue.length > 0);
      if (args.json) out(JSON.stringify(held, null, 2));
      else out(held.length === 0 ? 'No locks held.' : held.map(formatInspection).join('\n'));
      return 0;
    }
    const seen = await locks.inspect(operand!);
    if (seen.state === 'free') {
      out(args.json ? JSON.stringify({ unlocked: false, reason: 'not locked' }) : `${operand} is not locked.`);
      return 0;
    }
    const holders = seen.holders.map((h) => h.owner).join(', ');
    if (!args.yes && !(await confirm(`Force-unlock "${operand}" held by ${holders}? [y/N] `))) {
      out(args.json ? JSON.stringify({ unlocked: false, reason: 'not confirmed' }) : 'Left as it is.');
      return 1;
    }
    const lock =
      seen.holdKind === 'token'
        ? locks.getSimpleLock(operand!)
        : seen.queue.length > 0
          ? locks.getFairLock(operand!)
          : locks.getLock(operand!);
    const unlocked = await lock.forceUnlock();
    out(
      args.json
        ? JSON.stringify({ unlocked, holders: seen.holders })
        : unlocked
          ? `Unlocked ${operand}.`
          : `${operand} was already free.`,
    );
    return 0;
  } finally {
    await locks.close();
  }
}

const quietLogger = { warn: () => undefined, error: () => undefined };

export async function main(argv: string[]): Promise<number> {
  try {
    return await run(parse(argv), (text) => process.stdout.write(`${text}\n`));
  } catch (error) {
    if (error instanceof UsageError) {
      process.stderr.write(`${error.message ? `${error.message}\n\n` : ''}${USAGE}\n`);
      return 2;
    }
    process.stderr.write(`${(error as Error).name}: ${(error as Error).message}\n`);
    return 1;
  }
}

if (require.main === module) {
  void main(process.argv.slice(2)).then((code) => process.exit(code));
}
