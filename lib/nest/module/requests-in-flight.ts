import { runAsRequest } from '../decorator/handler-invocation';

/**
 * Middleware for every HTTP route: marks the request as in flight (see inHandlerCall), so that a wait
 * for a lock inside it (LockService in an undecorated handler, a resolver) ends as closing starts,
 * since closing the HTTP server waits for every request in flight. A middleware rather than a global
 * interceptor: an interceptor on every route sends every request through Nest's interceptor pipeline
 * (about 100 µs of CPU on a trivial route); this is one function call and an AsyncLocalStorage.run().
 * Nest runs it after the body parsers, so the handler's whole call chain runs inside the mark.
 */
export function markRequestInFlight(_request: unknown, _response: unknown, next: () => void): void {
  runAsRequest(next);
}
