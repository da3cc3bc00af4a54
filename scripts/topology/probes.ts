/**
 * Readiness probes. Each probe opens one short-lived ioredis connection and closes it, so polling
 * never leaves sockets (or reconnect timers) keeping the caller's event loop alive.
 */
import Redis from 'ioredis';
import { formatHostPort, sleep, type HostPort } from '../tooling';
import { logTail } from './processes';

/** A probe result: `undefined` when ready, otherwise what is not ready yet (for the timeout error). */
export type Probe = () => Promise<string | undefined>;

/** A node to probe: its address, the CA of a TLS topology, the password of one that requires it. */
export type Endpoint = HostPort & { tls?: { ca: Buffer; cert?: Buffer; key?: Buffer }; password?: string };

export async function withClient<T>(address: Endpoint, fn: (client: Redis) => Promise<T>): Promise<T> {
  const client = new Redis({
    host: address.host,
    port: address.port,
    tls: address.tls,
    password: address.password,
    lazyConnect: true,
    enableReadyCheck: false, // sentinels and loading nodes must still be probeable
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null, // one attempt per probe; the poll loop is the retry
    connectTimeout: 1000,
    commandTimeout: 2000, // a SIGSTOPped node accepts TCP but never answers
  });
  client.on('error', () => undefined); // failures surface through the rejected command instead
  try {
    await client.connect();
    return await fn(client);
  } finally {
    client.disconnect();
  }
}

/** Poll `probe` until ready; on timeout throw naming `what`, the last reason and the node's log tail. */
export async function waitUntil(
  what: string,
  probe: Probe,
  opts: { timeoutMs?: number; logFile?: string; signal?: AbortSignal } = {},
): Promise<void> {
  const timeoutMs = opts.timeoutMs ?? 30_000;
  const deadline = Date.now() + timeoutMs;
  let reason = 'not probed yet';
  for (;;) {
    opts.signal?.throwIfAborted();
    try {
      const notReady = await probe();
      if (notReady === undefined) return;
      reason = notReady;
    } catch (err) {
      reason = err instanceof Error ? err.message : String(err);
    }
    if (Date.now() >= deadline) {
      throw new Error(
        `${what} not ready after ${timeoutMs / 1000}s: ${reason}${opts.logFile ? logTail(opts.logFile) : ''}`,
      );
    }
    await sleep(100);
  }
}

export function parseInfo(text: string): Record<string, string> {
  const fields: Record<string, string> = {};
  for (const line of text.split(/\r?\n/)) {
    const at = line.indexOf(':');
    if (at > 0 && !line.startsWith('#')) fields[line.slice(0, at)] = line.slice(at + 1);
  }
  return fields;
}

/** SENTINEL replies describe an instance as a flat [key, value, key, value, ...] array. */
function pairs(reply: unknown): Record<string, string> {
  const fields: Record<string, string> = {};
  if (Array.isArray(reply)) {
    for (let i = 0; i + 1 < reply.length; i += 2) fields[String(reply[i])] = String(reply[i + 1]);
  }
  return fields;
}

function instances(reply: unknown): Record<string, string>[] {
  return Array.isArray(reply) ? reply.map(pairs) : [];
}

const unhealthy = (flags: string): boolean => /s_down|o_down|disconnected/.test(flags);

export const answersPing =
  (address: Endpoint): Probe =>
  () =>
    withClient(address, async (c) => ((await c.ping()) === 'PONG' ? undefined : 'PING did not answer PONG'));

export const replicaLinked =
  (address: Endpoint): Probe =>
  () =>
    withClient(address, async (c) => {
      const info = parseInfo(await c.info('replication'));
      if (info.role !== 'slave') return `role is ${info.role}, expected a replica`;
      return info.master_link_status === 'up' ? undefined : `master_link_status:${info.master_link_status}`;
    });

export const masterHasOnlineReplicas =
  (address: Endpoint, expected: number): Probe =>
  () =>
    withClient(address, async (c) => {
      const info = parseInfo(await c.info('replication'));
      const online = Object.keys(info).filter((k) => /^slave\d+$/.test(k) && info[k].includes('state=online'));
      return online.length >= expected ? undefined : `${online.length}/${expected} replicas online (role:${info.role})`;
    });

/** The sentinel knows the master, all its replicas (linked) and every other sentinel. */
export const sentinelReady =
  (sentinel: Endpoint, masterName: string, master: HostPort, replicas: number, otherSentinels: number): Probe =>
  () =>
    withClient(sentinel, async (c) => {
      const addr = (await c.call('SENTINEL', 'get-master-addr-by-name', masterName)) as string[] | null;
      if (!addr || addr[0] !== master.host || Number(addr[1]) !== master.port) {
        return `get-master-addr-by-name ${masterName} = ${JSON.stringify(addr)}, expected ${formatHostPort(master)}`;
      }
      const known = instances(await c.call('SENTINEL', 'replicas', masterName));
      const linked = known.filter((r) => !unhealthy(r.flags ?? '') && r['master-link-status'] === 'ok');
      if (linked.length < replicas) return `knows ${linked.length}/${replicas} linked replicas`;
      const peers = instances(await c.call('SENTINEL', 'sentinels', masterName));
      const healthy = peers.filter((s) => !unhealthy(s.flags ?? ''));
      return healthy.length >= otherSentinels ? undefined : `knows ${healthy.length}/${otherSentinels} other sentinels`;
    });

export interface ClusterNodeLine {
  id: string;
  port: number;
  flags: string[];
  /** '-' for a master */
  masterId: string;
  linkState: string;
  slots: string[];
}

export function parseClusterNodes(text: string): ClusterNodeLine[] {
  return text
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const [id, addr, flags, masterId, , , , linkState, ...slots] = line.trim().split(' ');
      return { id, port: Number(/:(\d+)@/.exec(addr)?.[1]), flags: flags.split(','), masterId, linkState, slots };
    });
}

/**
 * This node's view is complete: state ok with every slot assigned, every peer known, connected and
 * healthy, `masters` masters owning slots with one linked replica each (gossip about replicas lags
 * behind `redis-cli --cluster create`), and if it is a replica itself, its replication link is up.
 */
export const clusterNodeReady =
  (address: Endpoint, masters: number, replicasPerMaster: number): Probe =>
  () =>
    withClient(address, async (c) => {
      const info = parseInfo(String(await c.call('CLUSTER', 'INFO')));
      if (info.cluster_state !== 'ok') return `cluster_state:${info.cluster_state}`;
      if (info.cluster_slots_assigned !== '16384') return `cluster_slots_assigned:${info.cluster_slots_assigned}`;
      const nodes = parseClusterNodes(String(await c.call('CLUSTER', 'NODES')));
      const total = masters * (1 + replicasPerMaster);
      if (nodes.length !== total) return `knows ${nodes.length}/${total} nodes`;
      const bad = nodes.filter(
        (n) => n.linkState !== 'connected' || n.flags.some((f) => ['fail', 'fail?', 'handshake', 'noaddr'].includes(f)),
      );
      if (bad.length > 0) return `sees ${bad.map((n) => `${n.port}(${n.flags.join(',')} ${n.linkState})`).join(' ')}`;
      const owners = nodes.filter((n) => n.flags.includes('master') && n.slots.length > 0);
      if (owners.length !== masters) return `sees ${owners.length}/${masters} masters owning slots`;
      for (const master of owners) {
        const replicas = nodes.filter((n) => n.flags.includes('slave') && n.masterId === master.id).length;
        if (replicas !== replicasPerMaster)
          return `sees ${replicas}/${replicasPerMaster} replicas of master ${master.port}`;
      }
      if (nodes.find((n) => n.flags.includes('myself'))?.flags.includes('slave')) {
        const repl = parseInfo(await c.info('replication'));
        if (repl.master_link_status !== 'up') return `replica master_link_status:${repl.master_link_status}`;
      }
      return undefined;
    });
