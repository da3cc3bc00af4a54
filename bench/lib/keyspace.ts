import type Redis from 'ioredis';

/** Keys of one shape (see `shapeOf`): how many, how many without a TTL, the longest TTL left among the others. */
export interface KeyGroup {
  keys: number;
  noTtl: number;
  /** Absent when no key of the group has a TTL. */
  maxTtlMs?: number;
}

/**
 * What the bench's Redis holds at one moment: `used_memory` and DBSIZE as Redis reports them (keys
 * past their TTL that its active expiry has not reclaimed yet included), then a SCAN of every key
 * with a pipelined PTTL each (SCAN skips and deletes keys past their TTL, so `keys` counts live keys).
 */
export interface KeyspaceSample extends KeyGroup {
  usedMemory: number;
  dbsize: number;
  /** Live keys by shape, e.g. `bench:{order:*}:fence`. */
  shapes: Record<string, KeyGroup>;
}

const SCAN_COUNT = 1_000;

/** A key with the lock name's number replaced by `*`: `bench:{order:17}:fence` -> `bench:{order:*}:fence`. */
export function shapeOf(key: string): string {
  return key.replace(/\d+/g, '*');
}

function add(group: KeyGroup, pttl: number): void {
  group.keys++;
  if (pttl === -1) group.noTtl++;
  else group.maxTtlMs = Math.max(group.maxTtlMs ?? 0, pttl);
}

export async function sampleKeyspace(admin: Redis): Promise<KeyspaceSample> {
  const memory = await admin.info('memory');
  const usedMemory = Number(/^used_memory:(\d+)/m.exec(memory)?.[1] ?? NaN);
  const dbsize = await admin.dbsize();
  const sample: KeyspaceSample = { usedMemory, dbsize, keys: 0, noTtl: 0, shapes: {} };
  let cursor = '0';
  do {
    const [next, keys] = await admin.scan(cursor, 'COUNT', SCAN_COUNT);
    cursor = next;
    if (keys.length === 0) continue;
    const pipeline = admin.pipeline();
    for (const key of keys) pipeline.pttl(key);
    const replies = (await pipeline.exec()) ?? [];
    keys.forEach((key, i) => {
      const [error, pttl] = replies[i] ?? [];
      if (error) throw error;
      if (pttl === -2) return; // gone between SCAN and PTTL
      add(sample, pttl as number);
      add((sample.shapes[shapeOf(key)] ??= { keys: 0, noTtl: 0 }), pttl as number);
    });
  } while (cursor !== '0');
  return sample;
}
