import type { ConnectionOptions } from '../../lib';
import { sharedTopology } from './topologies';

export interface DeploymentCase {
  name: 'single' | 'master-slave' | 'sentinel' | 'cluster';
  connection: ConnectionOptions;
}

/** The four deployments of the connection-strategies issue, on the shared test topologies. */
export function deploymentCases(): DeploymentCase[] {
  const single = sharedTopology('single');
  const replica = sharedTopology('replica');
  const sentinel = sharedTopology('sentinel');
  const cluster = sharedTopology('cluster');
  return [
    { name: 'single', connection: { type: 'single', host: single.masters[0].host, port: single.masters[0].port } },
    {
      name: 'master-slave',
      connection: { type: 'master-slave', master: replica.masters[0], replicas: replica.replicas },
    },
    {
      name: 'sentinel',
      connection: { type: 'sentinel', sentinels: sentinel.sentinels, masterName: sentinel.sentinelMasterName! },
    },
    { name: 'cluster', connection: { type: 'cluster', nodes: cluster.masters } },
  ];
}
