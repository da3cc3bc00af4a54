import { Injectable, type CallHandler, type ExecutionContext, type NestInterceptor } from '@nestjs/common';
import { Observable } from 'rxjs';
import { inHandlerCall, runAsHandlerCall } from './handler-invocation';

/**
 * Marks every call of a handler by Nest as a handler's call (see inHandlerCall), decorated or not.
 * Closing the HTTP server waits for every request in flight, so a wait for a lock inside one must end
 * as closing starts; without the mark, an undecorated handler waiting in LockService (no waitTime)
 * kept app.close() waiting for the other holder. RedisLockModule applies it to every handler but a
 * WebSocket gateway's (Nest gives gateways no global interceptor; closing one waits for no handler).
 */
@Injectable()
export class HandlerCallInterceptor implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    if (inHandlerCall()) return next.handle();
    const handler = context.getHandler();
    // Subscribed inside the mark: the handler is called (and its promises made) on subscription.
    return new Observable((subscriber) => runAsHandlerCall(handler, () => next.handle().subscribe(subscriber)));
  }
}
