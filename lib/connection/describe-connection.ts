import type { ConnectionOptions, HostPort } from './connection-options';
import { isRedisDeployment } from './create-deployment';
import type { RedisDeployment } from './redis-deployment';

/** Where we tried to connect, without credentials. */
export function describeConnection(connection: ConnectionOptions | RedisDeployment): string {
  if (isRedisDeployment(connection)) return `the ${connection.type} deployment given`;
  const address = ({ host, port }: HostPort) => `${host}:${port}`;
  switch (connection.type) {
    case 'single': {
      if (connection.url === undefined) return `${connection.host ?? '127.0.0.1'}:${connection.port ?? 6379}`;
      const url = new URL(connection.url);
      return `${url.hostname}:${url.port || 6379}`;
    }
    case 'master-slave':
      return `master ${address(connection.master)}`;
    case 'sentinel':
      return `sentinels ${connection.sentinels.map(address).join(', ')} (master "${connection.masterName}")`;
    case 'cluster':
      return `cluster nodes ${connection.nodes.map(address).join(', ')}`;
    default:
      return 'the client given';
  }
}
