import { ConnectionConfigError } from '../../engine/errors';
import { durationProblem, TIMEOUT_RULE } from '../../engine/util/validation';
import { isHostPort, isPort } from '../addresses';
import { ClusterDeployment } from './cluster-deployment';
import type { ConnectionOptions } from '../connection-options';
import { DEPLOY_TYPES } from '../connection-options';
import { ExistingClientDeployment } from './existing-client-deployment';
import { MasterSlaveDeployment } from './master-slave-deployment';
import type { RedisDeployment } from './redis-deployment';
import { SentinelDeployment } from './sentinel-deployment';
import { SingleDeployment } from './single-deployment';

/**
 * The strategy pattern of seed 001: picks the deployment for `options.type`. Throws
 * ConnectionConfigError listing every problem before any connection is opened.
 */
export function createDeployment(options: ConnectionOptions): RedisDeployment {
  const problems = connectionProblems(options);
  if (problems.length > 0) throw new ConnectionConfigError(problems);
  switch (options.type) {
    case 'single':
      return new SingleDeployment(options);
    case 'master-slave':
      return new MasterSlaveDeployment(options);
    case 'sentinel':
      return new SentinelDeployment(options);
    case 'cluster':
      return new ClusterDeployment(options);
    case 'client':
      return new ExistingClientDeployment(options);
  }
}

export function isRedisDeployment(value: unknown): value is RedisDeployment {
  const v = value as RedisDeployment | undefined;
  return !!v && typeof v.ready === 'function' && typeof v.close === 'function' && !!v.client && !!v.pubsub;
}

/** Everything wrong with `options`, each naming the option to fix. */
export function connectionProblems(options: ConnectionOptions | undefined): string[] {
  if (!options || typeof options !== 'object') return ['connection options are missing: give { type, … }'];
  const problems: string[] = [];
  const addresses = (field: string, list: unknown, min: number) => {
    if (!Array.isArray(list) || list.length < min) {
      problems.push(`${field} needs at least ${min} host:port address(es)`);
      return;
    }
    list.forEach((a, i) => {
      if (!isHostPort(a)) problems.push(`${field}[${i}] is not a { host, port } address with a port in 1-65535`);
    });
  };
  switch (options.type) {
    case 'single':
      // An address field given as undefined or '' is an environment variable that is not set, not a wish
      // for the default (leave the field out for redis://127.0.0.1:6379).
      for (const field of ['url', 'host'] as const) {
        if (field in options && (options[field] === undefined || options[field] === '')) {
          problems.push(
            `${field} is ${JSON.stringify(options[field]) ?? 'undefined'}: is its environment variable unset? Leave ${field} out to connect to 127.0.0.1:6379`,
          );
        }
      }
      if (options.url !== undefined && options.url !== '' && !/^rediss?:\/\//.test(options.url))
        problems.push('url must start with redis:// or rediss://');
      if (options.port !== undefined && !isPort(options.port)) problems.push('port must be an integer in 1-65535');
      break;
    case 'master-slave':
      if (!isHostPort(options.master)) problems.push('master must be a { host, port } address');
      addresses('replicas', options.replicas, 0);
      break;
    case 'sentinel':
      addresses('sentinels', options.sentinels, 1);
      if (typeof options.masterName !== 'string' || options.masterName.length === 0)
        problems.push('masterName is required');
      break;
    case 'cluster':
      addresses('nodes', options.nodes, 1);
      break;
    case 'client':
      if (!options.client || typeof (options.client as { defineCommand?: unknown }).defineCommand !== 'function') {
        problems.push('client must be an ioredis Redis or Cluster instance');
      }
      break;
    default:
      problems.push(
        `type must be one of ${[...DEPLOY_TYPES, 'client'].join(', ')}; got ${JSON.stringify((options as { type?: unknown }).type)}`,
      );
  }
  if ('db' in options && options.db !== undefined && (!Number.isInteger(options.db) || options.db < 0)) {
    problems.push('db must be a non-negative integer');
  }
  if ('commandTimeout' in options) {
    const problem = durationProblem('commandTimeout', options.commandTimeout, TIMEOUT_RULE);
    if (problem) problems.push(problem);
  }
  for (const field of ['tls', 'sentinelTls'] as const) {
    const value = (options as Partial<Record<typeof field, unknown>>)[field];
    // ioredis would take a string here as TLS options and fail at connect time, far from the cause.
    if (value !== undefined && typeof value !== 'boolean' && (value === null || typeof value !== 'object')) {
      problems.push(`${field} must be true, false or Node TLS options (an object); got ${JSON.stringify(value)}`);
    }
  }
  return problems;
}
