import { LockError } from './lock-error';

/** Redis's error codes that refuse a command outright, and what to do about each. */
const ADVICE = {
  OOM:
    'Redis is at its maxmemory and may evict nothing (maxmemory-policy noeviction): it takes no new lock ' +
    'until memory is freed or maxmemory raised. Releases and renewals still run.',
  MISCONF:
    'Redis refuses writes while it cannot save to disk (stop-writes-on-bgsave-error): fix its disk or ' +
    'persistence settings. Releases are sent again until it takes them; held locks cannot be renewed ' +
    'meanwhile and may run out with their leases.',
  NOPERM:
    "The connection's Redis user lacks a permission this library needs: see " +
    '"Redis users (ACL)" in docs/deployments.md.',
  READONLY:
    'The server this client writes to is a read-only replica now (demoted by REPLICAOF or a failover). A ' +
    'single or master-slave connection stays on the server it was given and does not follow promotions: point ' +
    "it at the new master and restart, or connect through Sentinel (type 'sentinel'), which follows them.",
} as const;

export type RedisRefusal = keyof typeof ADVICE;

/**
 * Redis 7.0's reply when an ACL refuses a command a script runs ("can't run this command", "can't
 * access at least one of the keys", "can't publish to the channel"); later versions answer NOPERM.
 */
const SCRIPT_ACL_REFUSAL = /^ERR The user executing the script can't /;

/**
 * The refusal code a Redis error reply starts with, if it is one of those above. READONLY only where it
 * is final (`readOnlyIsFinal`: a connection that does not follow promotions); elsewhere it is a
 * failover under way.
 */
export function refusalCode(error: unknown, readOnlyIsFinal = false): RedisRefusal | undefined {
  if (!(error instanceof Error)) return undefined;
  if (SCRIPT_ACL_REFUSAL.test(error.message)) return 'NOPERM';
  const code = /^(OOM|MISCONF|NOPERM|READONLY)\b/.exec(error.message)?.[1];
  if (code === 'READONLY' && !readOnlyIsFinal) return undefined;
  return code as RedisRefusal | undefined;
}

/**
 * Redis answered, and refused: it is out of memory (`OOM`), cannot persist (`MISCONF`), the
 * connection's user may not run the command (`NOPERM`), or the server was demoted to a replica under a
 * connection that does not follow promotions (`READONLY`). `code` says which. Waiting would not help,
 * so the operation fails at once; a refused acquisition wrote nothing.
 */
export class RedisRefusedError extends LockError {
  constructor(
    key: string | undefined,
    readonly operation: string,
    readonly code: RedisRefusal,
    cause: Error,
    /** What to grant or change, when the caller knows more than the code says. */
    hint?: string,
  ) {
    const reply = cause.message.replace(/\.? script: .*$/s, '').replace(/\.$/, '');
    const advice = hint === undefined ? ADVICE[code] : `${hint} ${ADVICE[code]}`;
    super(`Redis refused "${operation}"${key === undefined ? '' : ` for lock "${key}"`}: ${reply}. ${advice}`, key, {
      cause,
    });
  }
}
