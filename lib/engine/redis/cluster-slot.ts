import { ioredisKeyPrefix, type RedisClient } from './redis-client';

/** Redis Cluster's key -> slot mapping: CRC16 (XMODEM) of the hash tag (or the whole key) mod 16384. */
const TABLE = (() => {
  const table = new Uint16Array(256);
  for (let i = 0; i < 256; i++) {
    let crc = i << 8;
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    table[i] = crc;
  }
  return table;
})();

export function clusterSlot(key: string): number {
  const open = key.indexOf('{');
  if (open !== -1) {
    const close = key.indexOf('}', open + 1);
    if (close > open + 1) key = key.slice(open + 1, close);
  }
  let crc = 0;
  for (const byte of Buffer.from(key)) crc = ((crc << 8) & 0xffff) ^ TABLE[((crc >> 8) ^ byte) & 0xff];
  return crc % 16384;
}

/** The slot of `key` sent through `client`, as Redis computes it: after ioredis put its keyPrefix (maybe a hash tag) first. */
export function slotThrough(client: RedisClient, key: string): number {
  return clusterSlot(ioredisKeyPrefix(client) + key);
}
