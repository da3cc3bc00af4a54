/**
 * Internal: an HTTP request's client disconnected while it waited for its lock. The interceptor
 * aborts the wait with it and answers 499, which nobody reads.
 */
export class ClientGoneError extends Error {
  override readonly name = 'ClientGoneError';
}
