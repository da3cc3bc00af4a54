import { ConnectionConfigError, RedisUnavailableError } from '../engine/errors';
import { engineOf, type LockClient } from '../engine/client/lock-client';
import { checkChannelAccess } from './channel-access';
import type { ConnectionOptions } from './connection-options';
import {
  connectTimeout,
  connectWithin,
  deploymentFor,
  lockClientOver,
  type LockClientSettings,
} from './create-lock-client';
import { describeConnection } from './describe-connection';
import type { RedisDeployment } from './deployments/redis-deployment';

/** How long the other masters may still take once a majority is ready, before start-up goes on without them. */
export const REDLOCK_STRAGGLER_GRACE_MS = 500;

/**
 * One LockClient per independent master, for RedLock. Resolves once a majority of the masters is
 * ready and the others have had REDLOCK_STRAGGLER_GRACE_MS more, since a RedLock needs no more: the
 * others keep reconnecting on their own and take part once they are back (a round skips a master
 * whose connection is not ready). No majority within the connect timeout: every connection is
 * closed and the error names the masters that could not be reached.
 * @example
 * const masters = await connectRedLockMasters([{ type: 'single', port: 7001 }, { type: 'single', port: 7002 }, { type: 'single', port: 7003 }]);
 * const redLock = new RedLock(masters, 'payout');
 */
export async function connectRedLockMasters(
  masters: readonly (ConnectionOptions | RedisDeployment)[],
  settings: LockClientSettings = {},
): Promise<LockClient[]> {
  const deployments = masters.map(deploymentFor);
  const timeout = connectTimeout(settings.operationTimeout);
  const quorum = Math.floor(masters.length / 2) + 1;
  const { ready, misconfigured } = await readyMasters(deployments, timeout, quorum);
  if (misconfigured.length > 0) {
    // Refused credentials (or another configuration error) never heal by waiting: fail start-up loudly,
    // even where a majority could go on without that master.
    await Promise.all(deployments.map((d) => d.close().catch(() => undefined)));
    throw new ConnectionConfigError(
      misconfigured.flatMap(({ index, error }) =>
        error.problems.map((problem) => `RedLock master ${describeConnection(masters[index])}: ${problem}`),
      ),
    );
  }
  const unreachable = ready.flatMap((isReady, i) => (isReady ? [] : [describeConnection(masters[i])]));
  if (masters.length - unreachable.length < quorum) {
    await Promise.all(deployments.map((d) => d.close().catch(() => undefined)));
    const cause = new Error(
      `only ${masters.length - unreachable.length} of ${masters.length} RedLock masters answered (a majority is ${quorum})`,
    );
    throw new RedisUnavailableError(undefined, 'connect', timeout, cause, unreachable.join(', '));
  }
  // Independent masters have no replicas to wait for.
  const clients = deployments.map((deployment) => lockClientOver(deployment, { ...settings, replicaSync: false }));
  // Each master that answered lets this user reach the lock channels (one that joins later is not checked).
  try {
    await Promise.all(
      clients.flatMap((client, i) =>
        ready[i] ? [checkChannelAccess(deployments[i], client.keyPrefix, client.operationTimeout)] : [],
      ),
    );
  } catch (error) {
    await Promise.all(clients.map((client) => client.close().catch(() => undefined)));
    throw error;
  }
  if (unreachable.length > 0) {
    engineOf(clients[0]).logger.warn(
      `RedLock masters not reachable yet (they join once they answer): ${unreachable.join(', ')}`,
    );
  }
  return clients;
}

interface MastersState {
  /** Which masters were ready. */
  ready: boolean[];
  /** Masters whose connect failed on their configuration (refused credentials, a wrong ROLE). */
  misconfigured: { index: number; error: ConnectionConfigError }[];
}

/**
 * Connects every master within `timeout`; resolves once all have connected or given up, or
 * REDLOCK_STRAGGLER_GRACE_MS after `quorum` of them are ready. Which ones were ready by then.
 */
function readyMasters(deployments: readonly RedisDeployment[], timeout: number, quorum: number): Promise<MastersState> {
  const state: MastersState = { ready: deployments.map(() => false), misconfigured: [] };
  return new Promise((resolve) => {
    let settled = 0;
    let readyCount = 0;
    const settle = () => {
      if (++settled === deployments.length) resolve(state);
    };
    deployments.forEach((deployment, i) =>
      connectWithin(deployment, timeout).then(
        () => {
          state.ready[i] = true;
          if (++readyCount === quorum) setTimeout(() => resolve(state), REDLOCK_STRAGGLER_GRACE_MS);
          settle();
        },
        (error: unknown) => {
          if (error instanceof ConnectionConfigError) state.misconfigured.push({ index: i, error });
          settle();
        },
      ),
    );
  });
}
