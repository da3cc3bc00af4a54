/**
 * The built-in load balancer, used when nginx is not installed: round-robin over the upstreams,
 * keep-alive connections to them, bodies streamed both ways. Like the nginx config the demo writes it
 * never retries a request on another upstream (GET /vN/pview is not idempotent: a retry could count
 * twice); an upstream that cannot be reached answers 502. Every response names its upstream in an
 * `X-Upstream` header, which the demo uses to show how requests were spread.
 */
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { pipeline } from 'node:stream';
import type { HostPort } from '../tooling';

/** An app instance behind the proxy. */
export type Upstream = HostPort;

export interface RunningProxy {
  port: number;
  close(): Promise<void>;
}

/** Hop-by-hop headers (RFC 9110 7.6.1) are never forwarded. */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

function forwardable(headers: http.IncomingHttpHeaders): http.OutgoingHttpHeaders {
  const named = new Set(
    String(headers.connection ?? '')
      .split(',')
      .map((h) => h.trim().toLowerCase()),
  );
  const out: http.OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined && !HOP_BY_HOP.has(name) && !named.has(name)) out[name] = value;
  }
  return out;
}

export async function startProxy(opts: { upstreams: Upstream[]; port: number; host?: string }): Promise<RunningProxy> {
  if (opts.upstreams.length === 0) throw new Error('the proxy needs at least one upstream');
  const host = opts.host ?? '127.0.0.1';
  // With a timeout set, the agent drops an idle upstream connection 1 s before the server's own
  // `Keep-Alive: timeout=N` would (Node's default N is 5); without one it ignores that hint and may
  // reuse a connection the app is just closing: ECONNRESET, a 502 for a request never processed.
  const agent = new http.Agent({ keepAlive: true, timeout: 60_000 });
  let next = 0;

  const server = http.createServer((req, res) => {
    const upstream = opts.upstreams[next];
    next = (next + 1) % opts.upstreams.length;
    const name = `${upstream.host}:${upstream.port}`;
    const headers = forwardable(req.headers);
    const forwardedFor = req.headers['x-forwarded-for'];
    headers['x-forwarded-for'] = [forwardedFor, req.socket.remoteAddress].filter(Boolean).join(', ');

    const upstreamReq = http.request({
      host: upstream.host,
      port: upstream.port,
      method: req.method,
      path: req.url,
      headers,
      agent,
    });
    upstreamReq.on('response', (upstreamRes) => {
      res.writeHead(upstreamRes.statusCode ?? 502, upstreamRes.statusMessage, {
        ...forwardable(upstreamRes.headers),
        'x-upstream': name,
      });
      pipeline(upstreamRes, res, () => undefined); // a broken stream destroys both sides
    });
    upstreamReq.on('error', (err: NodeJS.ErrnoException) => {
      if (res.headersSent) {
        res.destroy(err);
        return;
      }
      const body = JSON.stringify({ error: 'bad gateway', upstream: name, reason: err.code ?? err.message });
      res.writeHead(502, {
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(body),
        'x-upstream': name,
      });
      res.end(body);
    });
    // The client went away before the answer: stop the upstream request too.
    res.on('close', () => {
      if (!res.writableFinished) upstreamReq.destroy();
    });
    // pipe, not pipeline: an upstream failure must not destroy the client's socket before the 502.
    req.on('error', () => upstreamReq.destroy());
    req.pipe(upstreamReq);
  });
  server.on('clientError', (_err, socket) => socket.destroy());

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host, port: opts.port, exclusive: true }, () => {
      server.off('error', reject);
      resolve();
    });
  });

  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
        agent.destroy();
      }),
  };
}
