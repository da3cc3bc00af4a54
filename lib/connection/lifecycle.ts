import type { Cluster, Redis } from 'ioredis';

/** Connects lazily created connections (no-op for ones already connecting or ready). */
export async function connectAll(connections: (Redis | Cluster)[]): Promise<void> {
  await Promise.all(connections.map((c) => (c.status === 'wait' ? c.connect() : undefined)));
}

/** Closes connections politely, falling back to a hard disconnect if QUIT cannot be sent. */
export async function quitAll(connections: (Redis | Cluster)[]): Promise<void> {
  await Promise.all(
    connections.map(async (c) => {
      if (c.status === 'end') return;
      try {
        await c.quit();
      } catch {
        c.disconnect();
      }
    }),
  );
}
