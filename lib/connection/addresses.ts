import { ConnectionConfigError } from '../engine/errors';
import type { HostPort } from './connection-options';

/**
 * The rules for where Redis is: ports, `host:port` entries (an IPv6 host in brackets) and
 * redis[s]:// URLs, for the connection options, the environment parser and the tools alike.
 */

export const DEFAULT_REDIS_PORT = 6379;

export function isPort(port: unknown): port is number {
  return Number.isInteger(port) && (port as number) > 0 && (port as number) < 65536;
}

export function isHostPort(a: unknown): a is HostPort {
  const v = a as HostPort | undefined;
  return !!v && typeof v.host === 'string' && v.host.length > 0 && isPort(v.port);
}

/** `host:port` or `[ipv6]:port` -> the address; undefined when it is not one. */
export function parseHostPort(entry: string): HostPort | undefined {
  const match = /^\[?([^\]]+?)\]?:(\d{1,5})$/.exec(entry.trim());
  const port = Number(match?.[2]);
  return match && isPort(port) ? { host: match[1], port } : undefined;
}

/** `host:port`, with an IPv6 host in brackets: what parseHostPort reads back. */
export function formatHostPort({ host, port }: HostPort): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

/**
 * A comma-separated `host:port` list (blank entries skipped): the addresses, and a problem naming
 * `field` for each malformed entry (by position) and for a list shorter than `min`.
 */
export function readHostPorts(field: string, raw: string, min = 0): { addresses: HostPort[]; problems: string[] } {
  const entries = raw
    .split(',')
    .map((e) => e.trim())
    .filter((e) => e.length > 0);
  const addresses: HostPort[] = [];
  const problems: string[] = [];
  entries.forEach((entry, i) => {
    const address = parseHostPort(entry);
    if (address) addresses.push(address);
    else problems.push(`${field} entry ${i + 1} ("${entry}") is not host:port with a port in 1-65535`);
  });
  if (entries.length < min) {
    problems.push(`${field} needs at least ${min} host:port address(es), e.g. 10.0.0.1:26379,10.0.0.2:26379`);
  }
  return { addresses, problems };
}

/**
 * Like readHostPorts, for a list that must be right: e.g. `parseHostPorts('REDLOCK_NODES', env.REDLOCK_NODES)`.
 * @throws ConnectionConfigError listing every malformed entry
 */
export function parseHostPorts(field: string, raw: string, min = 1): HostPort[] {
  const { addresses, problems } = readHostPorts(field, raw, min);
  if (problems.length > 0) throw new ConnectionConfigError(problems);
  return addresses;
}

/** What is wrong with `raw` as a redis[s]:// URL, or undefined; never quotes its password. */
export function redisUrlProblem(field: string, raw: string): string | undefined {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return `${field} is not a valid URL (expected redis://host:port)`;
  }
  if (url.protocol !== 'redis:' && url.protocol !== 'rediss:') {
    return `${field} must start with redis:// or rediss://; got "${url.protocol}//…"`;
  }
  if (!url.hostname) return `${field} has no host`;
  return undefined;
}

/** The server a redis[s]:// URL points at (port 6379 unless it says otherwise); check it with redisUrlProblem first. */
export function redisUrlAddress(raw: string): HostPort {
  const url = new URL(raw);
  return { host: url.hostname.replace(/^\[|\]$/g, ''), port: url.port === '' ? DEFAULT_REDIS_PORT : Number(url.port) };
}
