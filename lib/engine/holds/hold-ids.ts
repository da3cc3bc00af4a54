import { randomBytes } from 'node:crypto';

/**
 * Makes the ids of one client's holds (see lua/include/hold-ids.lua): unique across processes and
 * restarts, so a copy of an old command can never be taken for a new one. A random part per maker (not
 * the client id, which an application may set and reuse) and a counter: cheap on the hot path.
 */
export function holdIdMaker(): () => string {
  const salt = randomBytes(9).toString('base64url');
  let next = 0;
  return () => salt + (next++).toString(36);
}
