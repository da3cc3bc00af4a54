import type { PubSub } from '../../engine/waiting/pubsub';
import type { PublishCommand, RedisClient } from '../../engine/redis/redis-client';
import type { DeployType, HostPort } from '../connection-options';

/** What the lock engine needs from a deployment; one strategy per deployment type creates it. */
export interface RedisDeployment {
  readonly type: DeployType | 'client';
  /** Lock commands (scripts, renewals) run here: always the master. */
  readonly client: RedisClient;
  /** Unlock notifications arrive here. */
  readonly pubsub: PubSub;
  /** 'spublish' on a Cluster, else 'publish'. */
  readonly publishCommand: PublishCommand;
  /** Replicas known to this deployment (master-slave), for health reporting. */
  readonly replicas: readonly HostPort[];
  /**
   * Connects and verifies the deployment (e.g. that the configured master is a master). May wait
   * through failed connection attempts: callers bound it (connectWithin).
   */
  ready(): Promise<void>;
  /** The latest error of a connection that is not ready yet, for saying why `ready()` took too long. */
  lastConnectionError?(): Error | undefined;
  /** Closes the connections this deployment created (never a client the user passed in). */
  close(): Promise<void>;
}
