import type { RedisOptions } from 'ioredis';
import type { CommonConnectionOptions } from './connection-options';

export const DEFAULT_COMMAND_TIMEOUT = 2_000;

/**
 * ioredis options for every connection we create. Chosen for a lock library:
 * - commandTimeout: a frozen server fails commands instead of hanging them;
 * - maxRetriesPerRequest 0: a script in flight when the connection drops is not re-sent on
 *   reconnect, where it could apply twice (a re-entry counted twice) or acquire for a caller that
 *   already gave up;
 * - enableOfflineQueue false: while disconnected, commands fail at once (bounded errors) instead of
 *   queueing and running later behind the caller's back;
 * - lazyConnect: `ready()` connects and verifies explicitly;
 * - retryStrategy: reconnect within 200 ms whatever the ioredis major (ioredis 6 backs off up to
 *   5 s), since every moment a lock's connection is down its key may stay blocked (reconnectDelay).
 */
export function lockConnectionOptions(options: CommonConnectionOptions): RedisOptions {
  return {
    ...options.redisOptions,
    username: options.username ?? options.redisOptions?.username,
    password: options.password ?? options.redisOptions?.password,
    db: options.db ?? options.redisOptions?.db,
    tls: tlsOptions(options.tls) ?? (options.tls === false ? undefined : options.redisOptions?.tls),
    commandTimeout: options.commandTimeout ?? DEFAULT_COMMAND_TIMEOUT,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    // Integer replies stay numbers (fencing tokens, hold counts): see LockClient's check.
    stringNumbers: false,
    lazyConnect: true,
    // A connection that never came up should not keep the process alive for ioredis's default 2 s.
    disconnectTimeout: options.redisOptions?.disconnectTimeout ?? 200,
    retryStrategy: options.redisOptions?.retryStrategy ?? reconnectDelay,
  };
}

/** ioredis's `tls` for our `tls` option: true is TLS with Node's defaults, false or none is no TLS. */
export function tlsOptions(tls: CommonConnectionOptions['tls']): RedisOptions['tls'] {
  return tls === true ? {} : tls === false ? undefined : tls;
}

/**
 * Reconnection back-off: 50, 100, 150, then every 200 ms. A sentinel's switch to the promoted replica
 * is only acted on at the next attempt (ioredis's failover detector cannot cut a back-off short), so
 * a longer back-off is waited out after the failover too: capped at 1 s, about 2 s into a failover
 * the attempts were 450 ms apart, and the key stayed blocked up to that long after the promotion.
 * A refused attempt costs a dead server little; five a second per connection is the price.
 */
export function reconnectDelay(attempt: number): number {
  return Math.min(attempt * 50, 200);
}

/**
 * What a subscriber connection changes: an offline queue, and queued commands kept across failed
 * reconnects. ioredis re-subscribes by itself on every reconnect and does not catch that call;
 * without a queue, or with its commands failed at each reconnect that does not succeed (the command
 * connection's maxRetriesPerRequest 0), a connection that drops again at that moment (a flapping
 * network, a failover) rejects it: the channels stay unsubscribed, and the unhandled rejection ends
 * the process. A subscriber only ever sends (S)SUBSCRIBE and (S)UNSUBSCRIBE, which are safe to queue
 * and to send again; the library bounds its own calls in time (see bounded.ts). What still rejects
 * (a close mid-reconnect, a commandTimeout) is handled by handleResubscribeRejections.
 */
export const SUBSCRIBER_OVERRIDES = { enableOfflineQueue: true, maxRetriesPerRequest: null } as const;
