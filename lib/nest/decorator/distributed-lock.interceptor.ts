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

/** Nginx's "client closed request": what a request that left while waiting gets (nobody reads it). */
const CLIENT_CLOSED_REQUEST = 499;

/**
 * Runs a handler decorated with `@DistributedLock()` (on the method or its class) holding its lock,
 * in a new lock scope per request. The lock is taken before the handler (and its pipes) run and
 * released when the handler's result completes, errors or is unsubscribed (client gone).
 *
 * Over HTTP: a missing key value -> 400; `waitTime` ran out -> 409 (`conflictStatus`) with
 * `Retry-After`; Redis unreachable -> 503; the lock error is the exception's `cause`. Elsewhere (RPC,
 * WebSocket) the typed errors themselves. `@DistributedLock()` applies this interceptor by itself.
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
      watchWait: context.getType() === 'http' ? (abort) => this.watchClient(context, abort) : undefined,
      mapError: (error) => this.toException(error, context, spec),
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
   */
  protected keySources(context: ExecutionContext): KeySources {
    switch (context.getType()) {
      case 'http': {
        const request = context.switchToHttp().getRequest<Record<string, unknown>>();
        const { params, query, body, headers, user } = request;
        return { params, query, body, headers, user, args: context.getArgs() };
      }
      case 'rpc':
        return { data: context.switchToRpc().getData(), args: context.getArgs() };
      case 'ws':
        return { data: context.switchToWs().getData(), args: context.getArgs() };
      default:
        return { args: context.getArgs() };
    }
  }

  /**
   * Maps a failure to get the lock (never an error of the handler) for the transport: HTTP exceptions
   * over HTTP, the typed lock errors elsewhere.
   * @example
   * // LockAcquireTimeoutError over HTTP -> 409 Conflict, Retry-After: 1
   */
  protected toException(error: unknown, context: ExecutionContext, spec?: LockSpec): unknown {
    if (context.getType() !== 'http') return error;
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
  const ms = Math.min(typical ?? 1_000, error.retryAfterMs ?? Infinity);
  return Math.max(1, Math.ceil(ms / 1_000));
}

/** Express (`header`), Fastify (`header`) or a bare Node response (`setHeader`). */
function setHeader(response: unknown, name: string, value: string): void {
  const r = response as { header?: (n: string, v: string) => void; setHeader?: (n: string, v: string) => void };
  if (typeof r?.header === 'function') r.header(name, value);
  else if (typeof r?.setHeader === 'function') r.setHeader(name, value);
}
