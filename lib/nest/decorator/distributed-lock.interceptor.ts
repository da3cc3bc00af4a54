import { STATUS_CODES } from 'node:http';
import {
  BadRequestException,
  HttpException,
  Inject,
  Injectable,
  ServiceUnavailableException,
  type CallHandler,
  type ExecutionContext,
  type NestInterceptor,
} from '@nestjs/common';
import type { Observable } from 'rxjs';
import {
  LockAcquireTimeoutError,
  LockQuorumError,
  RedisRefusedError,
  RedisUnavailableError,
  ReplicaSyncError,
} from '../../engine/errors';
import { abortAtShutdown } from '../service/until-shutdown';
import { RedisLockRuntime } from '../module/redis-lock.runtime';
import type { HandlerInvocation } from './handler-invocation';
import { keyFunctionNames, keyFunctionResult, renderKeyTemplate, type KeySources } from './key-template';
import { LockKeyError } from '../errors/lock-key-error';
import { LockModuleClosedError } from '../errors/lock-module-closed-error';
import { ClientGoneError } from '../errors/client-gone-error';
import { lockedObservable } from './locked-observable';
import { lockSpecOf, type LockSpec } from './lock-spec';
import { LockService } from '../service/lock.service';
import { DEFAULT_CONFLICT_STATUS, REDIS_LOCK_MODULE_OPTIONS } from '../redis-lock.constants';
import type { RedisLockModuleOptions } from '../module/redis-lock-module.options';
import { messages } from '../redis-lock.messages';
import {
  graphqlKeyArgs,
  LockGraphQLError,
  lockFailureOf,
  logLockFailure,
  optionalExceptionClass,
  retryAfterMs,
  transportPayload,
  type LockFailure,
} from './transport-errors';

/** Nginx's "client closed request": what a request that left while waiting gets (nobody reads it). */
const CLIENT_CLOSED_REQUEST = 499;

/**
 * Runs a handler decorated with `@DistributedLock()` (on the method or its class) holding its lock,
 * in a new lock scope per request. The lock is taken before the handler (and its pipes) run and
 * released when the handler's result completes, errors or is unsubscribed (client gone).
 *
 * Over HTTP: a missing key value -> 400; `waitTime` ran out -> 409 (`conflictStatus`) with
 * `Retry-After`; Redis unreachable -> 503; the lock error is the exception's `cause`. Over GraphQL,
 * RPC and WebSocket the same failures as each transport's clients read them (`LockFailure`: code
 * BAD_USER_INPUT, LOCK_BUSY with `retryAfterMs`, LOCK_UNAVAILABLE), logged at debug (busy, bad key)
 * or warn (unavailable), never as Nest's ERROR. `@DistributedLock()` applies this interceptor by itself.
 *
 * Subclass it to change how names are built or errors mapped, and apply the subclass with
 * `@UseInterceptors()` next to `SetMetadata(DISTRIBUTED_LOCK_METADATA, options)`.
 * @example
 * @Injectable()
 * export class TenantLockInterceptor extends DistributedLockInterceptor {
 *   protected override async lockName(context: ExecutionContext, spec: LockSpec) {
 *     return `${tenantOf(context)}:${await super.lockName(context, spec)}`;
 *   }
 * }
 */
@Injectable()
export class DistributedLockInterceptor implements NestInterceptor {
  // Injected as a property, so that a subclass's constructor keeps the (locks, options) signature.
  @Inject(RedisLockRuntime) private readonly runtime!: RedisLockRuntime;

  constructor(
    /** This application's LockService, for subclasses. */
    @Inject(LockService) protected readonly locks: LockService,
    @Inject(REDIS_LOCK_MODULE_OPTIONS) protected readonly options: RedisLockModuleOptions,
  ) {}

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const handler = context.getHandler();
    const spec = lockSpecOf(context.getClass(), handler);
    const intercepted = this.runtime.interceptedCalls;
    if (!spec || intercepted.has(context)) return next.handle();
    intercepted.add(context);
    const invocation: HandlerInvocation = { handler, claimed: false };
    return lockedObservable({
      runtime: this.runtime,
      spec,
      invocation,
      name: () => this.lockNames(context, spec),
      run: () => next.handle(),
      newScope: true,
      watchWait: (abort) => {
        const stopClosing = this.watchClosing(abort);
        const stopClient = context.getType() === 'http' ? this.watchClient(context, abort) : undefined;
        return () => {
          stopClosing();
          stopClient?.();
        };
      },
      mapError: (error) => {
        this.logFailure(error, context, spec);
        return this.toException(error, context, spec);
      },
    });
  }

  /**
   * The lock name of this call: the key template rendered over the request (HTTP) or the message
   * (RPC, WebSocket), or what the key function returns for the ExecutionContext.
   * @example
   * // 'article:{params.id}' on GET /articles/42 -> 'article:42'
   */
  protected async lockName(context: ExecutionContext, spec: LockSpec): Promise<string> {
    if (typeof spec.key === 'function') return keyFunctionResult(await spec.key(context));
    return renderKeyTemplate(spec.key, this.keySources(context));
  }

  /**
   * Every lock name of this call: `lockName` once per key template (so an override of it applies to
   * each name of a multi-key lock), or the names a key function returns.
   */
  protected async lockNames(context: ExecutionContext, spec: LockSpec): Promise<string[]> {
    if (typeof spec.key === 'function') return keyFunctionNames(await spec.key(context));
    return Promise.all(spec.keys.map((key) => this.lockName(context, { ...spec, key, keys: [key] })));
  }

  /**
   * What placeholders read from in this context.
   * @example
   * // HTTP: { params, query, body, headers, user } of the request
   * // GraphQL: args = the resolver's arguments ({args.id}), with the handler's by index ({args.1.id})
   */
  protected keySources(context: ExecutionContext): KeySources {
    switch (context.getType<string>()) {
      case 'http': {
        const request = context.switchToHttp().getRequest<Record<string, unknown>>();
        const { params, query, body, headers, user } = request;
        return { params, query, body, headers, user, args: context.getArgs() };
      }
      case 'rpc':
        return { data: context.switchToRpc().getData(), args: context.getArgs() };
      case 'ws':
        return { data: context.switchToWs().getData(), args: context.getArgs() };
      case 'graphql':
        return { args: graphqlKeyArgs(context.getArgs()) };
      default:
        return { args: context.getArgs() };
    }
  }

  /**
   * Maps a failure to get the lock (never an error of the handler) for the transport: HTTP exceptions
   * over HTTP; over GraphQL a `LockGraphQLError` (its `extensions` reach the client); over RPC and
   * WebSocket an `RpcException` / `WsException` whose error is `transportPayload(failure)` (the typed
   * error itself when that package cannot be loaded). Anything else is returned unchanged.
   * @example
   * // LockAcquireTimeoutError over HTTP -> 409 Conflict, Retry-After: 1
   * // over GraphQL -> extensions { code: 'LOCK_BUSY', error: 'LockAcquireTimeoutError', lock, retryAfterMs, statusCode: 409 }
   */
  protected toException(error: unknown, context: ExecutionContext, spec?: LockSpec): unknown {
    const type = context.getType<string>();
    if (type === 'http') return this.toHttpException(error, context, spec);
    const failure = this.lockFailure(error, context, spec);
    if (!failure) return error;
    switch (type) {
      case 'graphql':
        return new LockGraphQLError(failure, { cause: error });
      case 'rpc': {
        const RpcException = optionalExceptionClass('@nestjs/microservices', 'RpcException');
        return RpcException ? withCause(new RpcException(transportPayload(failure)), error) : error;
      }
      case 'ws': {
        const WsException = optionalExceptionClass('@nestjs/websockets', 'WsException');
        const pattern = (context.switchToWs() as { getPattern?: () => unknown }).getPattern?.();
        return WsException ? withCause(new WsException(transportPayload(failure, { pattern })), error) : error;
      }
      default:
        return error;
    }
  }

  /**
   * What a client of a GraphQL, RPC or WebSocket handler is told about `error`; undefined when it is
   * not a failure to get the lock. Override it to change codes or messages and keep the transports.
   */
  protected lockFailure(error: unknown, context: ExecutionContext, spec?: LockSpec): LockFailure | undefined {
    return lockFailureOf(error, {
      conflictStatus: this.options.conflictStatus ?? DEFAULT_CONFLICT_STATUS,
      typicalHoldMs: spec ? this.runtime.holdTimes.typicalOf(spec) : undefined,
    });
  }

  private toHttpException(error: unknown, context: ExecutionContext, spec?: LockSpec): unknown {
    if (error instanceof LockKeyError) return new BadRequestException(error.message, { cause: error });
    if (error instanceof LockAcquireTimeoutError) {
      const typical = spec ? this.runtime.holdTimes.typicalOf(spec) : undefined;
      setHeader(context.switchToHttp().getResponse(), 'Retry-After', String(retryAfterSeconds(error, typical)));
      const status = this.options.conflictStatus ?? DEFAULT_CONFLICT_STATUS;
      const body = { statusCode: status, message: messages.httpConflict(), error: STATUS_CODES[status] ?? 'Error' };
      return new HttpException(body, status, { cause: error });
    }
    if (
      error instanceof RedisUnavailableError ||
      error instanceof RedisRefusedError ||
      error instanceof LockModuleClosedError ||
      error instanceof ReplicaSyncError ||
      error instanceof LockQuorumError
    ) {
      return new ServiceUnavailableException(messages.httpUnavailable(), { cause: error });
    }
    if (error instanceof ClientGoneError) {
      return new HttpException(messages.httpClientGone(), CLIENT_CLOSED_REQUEST, { cause: error });
    }
    return error;
  }

  /** Outside HTTP: busy and bad key at debug, unavailable at warn (see logLockFailure). */
  private logFailure(error: unknown, context: ExecutionContext, spec: LockSpec): void {
    if (context.getType() === 'http') return;
    const failure = lockFailureOf(error, { conflictStatus: 0 });
    if (failure) logLockFailure(this.runtime.logger, spec.owner, failure, error);
  }

  /** Ends the wait once the application starts closing (see LockLifecycle.handlerWaits). */
  private watchClosing(abort: (reason: unknown) => void): () => void {
    return abortAtShutdown(this.runtime.lifecycle.handlerWaits, abort);
  }

  /** While the request waits for its lock: abort the wait if the client disconnects. */
  private watchClient(context: ExecutionContext, abort: (reason: unknown) => void): () => void {
    const response = context.switchToHttp().getResponse<{ raw?: unknown }>();
    const raw = (response?.raw ?? response) as Partial<NodeJS.EventEmitter> & { writableEnded?: boolean };
    if (typeof raw?.once !== 'function' || typeof raw.removeListener !== 'function') return () => undefined;
    const onClose = () => {
      if (!raw.writableEnded) abort(new ClientGoneError(messages.httpClientGone()));
    };
    raw.once('close', onClose);
    return () => raw.removeListener!('close', onClose);
  }
}

/**
 * Retry-After, in whole seconds (at least 1): how long this handler typically holds its lock (recent
 * holds in this process), but never longer than the holder's remaining lease; 1 until a hold was seen.
 * A watchdog lease (30 s, renewed) says nothing about when the holder finishes, so it is only a cap.
 */
function retryAfterSeconds(error: LockAcquireTimeoutError, typical: number | undefined): number {
  return Math.max(1, Math.ceil(retryAfterMs(error, typical) / 1_000));
}

/** Keeps the typed lock error reachable from the transport's exception (as HTTP exceptions do). */
function withCause<E extends Error>(exception: E, cause: unknown): E {
  if (exception.cause === undefined) Object.defineProperty(exception, 'cause', { value: cause, configurable: true });
  return exception;
}

/** Express (`header`), Fastify (`header`) or a bare Node response (`setHeader`). */
function setHeader(response: unknown, name: string, value: string): void {
  const r = response as { header?: (n: string, v: string) => void; setHeader?: (n: string, v: string) => void };
  if (typeof r?.header === 'function') r.header(name, value);
  else if (typeof r?.setHeader === 'function') r.setHeader(name, value);
}
