/** What a semaphore's hand-over message says after the member it addresses (see semaphore-queue.lua). */
export interface PermitHandOver {
  /** Redis server time (ms) of the releasing script that recorded the hold. */
  grantedAtMs: number;
  fencingToken: number;
}

/** '<server ms>:<fencing token>', or undefined for anything else (a message of another shape). */
export function parsePermitHandOver(payload: string): PermitHandOver | undefined {
  const cut = payload.indexOf(':');
  if (cut <= 0) return undefined;
  const grantedAtMs = Number(payload.slice(0, cut));
  const fencingToken = Number(payload.slice(cut + 1));
  if (!Number.isSafeInteger(grantedAtMs) || !Number.isSafeInteger(fencingToken) || cut === payload.length - 1) {
    return undefined;
  }
  return { grantedAtMs, fencingToken };
}
