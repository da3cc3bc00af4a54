/** What of an HTTP server (node's, or the one a Nest adapter wraps) this needs: its close(). */
interface Closable {
  close(...args: unknown[]): unknown;
}

/**
 * Calls `closing` whenever `server.close()` is called, before it runs; returns how to stop that. Who
 * closes the server (Nest's adapter, Apollo's drain in GraphQLModule's onModuleDestroy, before any
 * hook of a global module) waits for the requests in flight, so their waits for locks must end then.
 * Node's server emits nothing as closing starts, hence the wrapper.
 */
export function onServerClosing(server: unknown, closing: () => void): () => void {
  if (!isClosable(server)) return () => undefined;
  const own = Object.prototype.hasOwnProperty.call(server, 'close');
  const close = server.close;
  const wrapped = function (this: unknown, ...args: unknown[]): unknown {
    closing();
    return close.apply(this, args);
  };
  server.close = wrapped;
  return () => {
    // Someone wrapped it after us: theirs calls ours, which then only calls the original.
    if (server.close !== wrapped) return;
    if (own) server.close = close;
    else delete (server as Partial<Closable>).close;
  };
}

function isClosable(server: unknown): server is Closable {
  return typeof server === 'object' && server !== null && typeof (server as Closable).close === 'function';
}
