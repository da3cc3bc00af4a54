import type { Cluster, Redis } from 'ioredis';
import { decodeName, lockKeys, readWriteKeys, semaphoreKeys } from './keys';
import { ioredisKeyPrefix, type RedisClient } from './redis-client';

/** Which family of keys a scanned key belongs to (see keys.ts): a lock, a read-write lock, a semaphore. */
export type ScannedKind = 'lock' | 'read-write' | 'semaphore';

/** A lock name found by a scan, and the family of key that named it. */
export interface ScannedName {
  name: string;
  kind: ScannedKind;
}

/** What follows `<prefix>:{<name>}` in a key made by `keys.ts` (the empty prefix and name give `:{}`). */
const suffixOf = (key: string): string => key.slice(':{}'.length);

/**
 * The keys that say a name is in use, by their suffix, taken from keys.ts so the two never disagree.
 * Fencing counters, hold ids and the rest outlive a hold, so they do not count: a fair lock's queue, a
 * read-write lock's waiting writers and a semaphore's waiting processes do, since they exist while
 * someone waits for a free lock.
 */
const NAMING_SUFFIXES = new Map<string, ScannedKind>([
  [suffixOf(lockKeys('', '').lock), 'lock'],
  [suffixOf(lockKeys('', '').queue), 'lock'],
  [suffixOf(readWriteKeys('', '').write), 'read-write'],
  [suffixOf(readWriteKeys('', '').readers), 'read-write'],
  [suffixOf(readWriteKeys('', '').writers), 'read-write'],
  [suffixOf(semaphoreKeys('', '').holds), 'semaphore'],
  [suffixOf(semaphoreKeys('', '').waiting), 'semaphore'],
]);

/** SCAN MATCH treats these as glob syntax; a prefix is matched literally. */
export const escapeGlob = (text: string): string => text.replace(/[*?[\]\\]/g, '\\$&');

/** Every master that holds keys (each master of a Cluster; the one connection otherwise). */
export const mastersOf = (redis: RedisClient): Redis[] =>
  redis.isCluster ? (redis as Cluster).nodes('master') : [redis as Redis];

/**
 * The SCAN MATCH pattern of the keys under lock prefix `prefix` (with the connection's ioredis
 * `keyPrefix`, which ioredis does not add to a pattern), `namePattern` a glob of the encoded name.
 */
export function keyPattern(redis: RedisClient, prefix: string, namePattern = '*'): string {
  return `${escapeGlob(ioredisKeyPrefix(redis) + prefix)}:{${namePattern}`;
}

/** The name and family of `key`, as SCAN returns it, if it is a key that names a lock under `prefix`. */
export function scannedName(redis: RedisClient, prefix: string, key: string): ScannedName | undefined {
  const start = `${ioredisKeyPrefix(redis)}${prefix}:{`;
  if (!key.startsWith(start)) return undefined;
  // encodeName percent-encodes braces, so the first '}' ends the name.
  const end = key.indexOf('}', start.length);
  if (end < 0) return undefined;
  const kind = NAMING_SUFFIXES.get(key.slice(end + 1));
  return kind && { name: decodeName(key.slice(start.length, end)), kind };
}

/** Calls `visit` with each batch of keys matching `match` on `node` (SCAN, never KEYS). */
export async function scanKeys(
  node: Redis,
  match: string,
  visit: (keys: string[]) => Promise<void> | void,
  count = 500,
): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await node.scan(cursor, 'MATCH', match, 'COUNT', count);
    cursor = next;
    if (keys.length > 0) await visit(keys);
  } while (cursor !== '0');
}

/**
 * Names of the reentrant, fair and simple locks under `prefix` whose encoded name matches the glob
 * `pattern`, on every master (a whole SCAN of each: for tools, not for a page that refreshes).
 */
export async function scanLockNames(redis: RedisClient, prefix: string, pattern = '*'): Promise<string[]> {
  const names = new Set<string>();
  for (const node of mastersOf(redis)) {
    await scanKeys(node, `${keyPattern(redis, prefix, pattern)}}`, (keys) => {
      for (const key of keys) {
        const found = scannedName(redis, prefix, key);
        if (found) names.add(found.name);
      }
    });
  }
  return [...names].sort();
}
