import { Injectable, type CallHandler, type ExecutionContext, type NestInterceptor } from '@nestjs/common';
import { Observable } from 'rxjs';
import { inHandlerCall, runAsHandlerCall } from './handler-invocation';

/**
 * Marks a call of a handler by Nest as a handler's call (see inHandlerCall), decorated or not: a wait
 * for a lock inside it ends as closing starts. HTTP requests are marked by the module's middleware
 * (see markRequestInFlight); this goes on each microservice and gateway handler (see MessageHandlerMarks).
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
