import { DEFAULT_REDIS_PORT, formatHostPort as address, redisUrlAddress } from './addresses';
import type { ConnectionOptions } from './connection-options';
import { isRedisDeployment } from './deployments/create-deployment';
import type { RedisDeployment } from './deployments/redis-deployment';

/** Where we tried to connect, without credentials. */
export function describeConnection(connection: ConnectionOptions | RedisDeployment): string {
  if (isRedisDeployment(connection)) return `the ${connection.type} deployment given`;
  switch (connection.type) {
    case 'single': {
      if (connection.url !== undefined) return address(redisUrlAddress(connection.url));
      return address({ host: connection.host ?? '127.0.0.1', port: connection.port ?? DEFAULT_REDIS_PORT });
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
