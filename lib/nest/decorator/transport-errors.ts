import * as common from '@nestjs/common';
import {
  LockAcquireTimeoutError,
  LockQuorumError,
  RedisRefusedError,
  RedisUnavailableError,
  ReplicaSyncError,
} from '../../engine/errors';
import { LockKeyError } from '../errors/lock-key-error';
import { LockModuleClosedError } from '../errors/lock-module-closed-error';
import type { LockLogger } from '../../engine/util/logger';
import { messages } from '../redis-lock.messages';

// What a failure to get a handler's lock looks like to the clients of GraphQL, RPC and WebSocket
// handlers. None of those packages is a dependency: GraphQL needs no import (an error carrying
// `extensions`), RpcException / WsException are loaded only once a handler of that transport fails.

/** What went wrong, as a client can act on it: retry later, fix the input, or try again when Redis is back. */
export type LockFailureCode = 'LOCK_BUSY' | 'BAD_USER_INPUT' | 'LOCK_UNAVAILABLE';

/** The fields every transport's client gets for a lock failure (GraphQL: in `extensions`, with `message` as the error's). */
export interface LockFailure {
  readonly code: LockFailureCode;
  /** The typed error's class name, e.g. "LockAcquireTimeoutError". */
  readonly error: string;
  /** What the same failure is over HTTP (409 or `conflictStatus`, 400, 503), for gateways that forward it. */
  readonly statusCode: number;
  readonly message: string;
  /** LOCK_BUSY: the lock name that stayed busy. */
  readonly lock?: string;
  /** LOCK_BUSY: when a retry may succeed, in ms (as HTTP's Retry-After, but not rounded to seconds). */
  readonly retryAfterMs?: number;
  /** BAD_USER_INPUT: the placeholder that had no usable value, e.g. "{args.id}". */
  readonly placeholder?: string;
}

/**
 * The failure `error` is, or undefined when it is not a failure to get a lock (an error of the
 * handler, a bad option): those go to the transport unchanged.
 */
export function lockFailureOf(
  error: unknown,
  hints: { conflictStatus: number; typicalHoldMs?: number },
): LockFailure | undefined {
  if (error instanceof LockKeyError) {
    return {
      code: 'BAD_USER_INPUT',
      error: error.name,
      statusCode: 400,
      message: error.message,
      placeholder: error.placeholder,
    };
  }
  if (error instanceof LockAcquireTimeoutError) {
    return {
      code: 'LOCK_BUSY',
      error: error.name,
      statusCode: hints.conflictStatus,
      message: error.message,
      lock: error.key,
      retryAfterMs: retryAfterMs(error, hints.typicalHoldMs),
    };
  }
  if (
    error instanceof RedisUnavailableError ||
    error instanceof RedisRefusedError ||
    error instanceof LockModuleClosedError ||
    error instanceof ReplicaSyncError ||
    error instanceof LockQuorumError
  ) {
    // The typed error's message can name Redis' address: the client gets a generic one.
    return { code: 'LOCK_UNAVAILABLE', error: error.name, statusCode: 503, message: messages.httpUnavailable() };
  }
  return undefined;
}

/**
 * Logs a failure outside HTTP (whose exceptions Nest does not log either): a busy lock or a bad key
 * value is the client's to handle, at debug; Redis unavailable is the operator's, at warn with the
 * typed error's message (which says where and why). Nest's filters do not log the mapped exceptions.
 */
export function logLockFailure(logger: LockLogger, owner: string, failure: LockFailure, error: unknown): void {
  const line = messages.transportFailure(owner, failure.code, (error as Error).message);
  if (failure.code === 'LOCK_UNAVAILABLE') logger.warn(line);
  else logger.debug?.(line);
}

/**
 * How long until a retry may get the lock: how long this handler typically holds it (recent holds in
 * this process), never more than the holder's remaining lease; 1 s until a hold was seen.
 */
export function retryAfterMs(error: LockAcquireTimeoutError, typicalHoldMs: number | undefined): number {
  return Math.max(1, Math.ceil(Math.min(typicalHoldMs ?? 1_000, error.retryAfterMs ?? Infinity)));
}

/** Nest 11's base of exceptions its filters do not log; a plain Error where a Nest version lacks it. */
const Intrinsic = ((common as unknown as { IntrinsicException?: ErrorConstructor }).IntrinsicException ??
  Error) as ErrorConstructor;

/**
 * A lock failure in a GraphQL resolver. graphql-js copies an original error's `extensions` onto the
 * GraphQLError it wraps it in, and Apollo keeps an `extensions.code` already set, so the
 * client sees `extensions.code` LOCK_BUSY, BAD_USER_INPUT or LOCK_UNAVAILABLE without this library
 * importing graphql. Nest does not log it (an IntrinsicException); the interceptor logs it at debug or warn.
 */
export class LockGraphQLError extends Intrinsic {
  override readonly name = 'LockGraphQLError';
  /** What GraphQL clients get: the failure without its message (the error's own). */
  readonly extensions: Omit<LockFailure, 'message'>;

  constructor(
    readonly failure: LockFailure,
    options?: { cause?: unknown },
  ) {
    super(failure.message, options);
    const { message: _message, ...extensions } = failure;
    this.extensions = withoutUndefined(extensions);
  }
}

/** What RPC and WebSocket clients get: Nest's `{ status: 'error', message }` with the failure's fields. */
export function transportPayload(failure: LockFailure, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return withoutUndefined({ status: 'error', ...failure, ...extra });
}

type ExceptionClass = new (error: string | object) => Error;

const loaded = new Map<string, ExceptionClass | null>();

/**
 * `exportName` of `packageName`, loaded from the application's copy (the one its exception filters
 * check with instanceof); null when the package is not installed.
 */
export function optionalExceptionClass(packageName: string, exportName: string): ExceptionClass | null {
  const key = `${packageName}#${exportName}`;
  if (!loaded.has(key)) {
    let found: ExceptionClass | null = null;
    try {
      // eslint-disable-next-line @typescript-eslint/no-require-imports -- optional, loaded on first use
      const exported = (require(packageName) as Record<string, unknown>)[exportName];
      if (typeof exported === 'function') found = exported as ExceptionClass;
    } catch {
      found = null;
    }
    loaded.set(key, found);
  }
  return loaded.get(key)!;
}

/**
 * `{args…}` of a GraphQL resolver: its GraphQL arguments by name (`{args.id}`) and the handler's
 * arguments by index (`{args.1.id}`, `{args.0.id}` the parent). GraphQL names cannot start with a digit.
 */
export function graphqlKeyArgs(handlerArgs: readonly unknown[]): Record<string, unknown> {
  const graphqlArgs = handlerArgs[1];
  const byName =
    typeof graphqlArgs === 'object' && graphqlArgs !== null && !Array.isArray(graphqlArgs) ? graphqlArgs : {};
  return { ...handlerArgs, ...byName };
}

function withoutUndefined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;
}
