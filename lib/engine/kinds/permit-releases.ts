import type { EngineContext } from '../client/engine-context';
import type { ReleaseReplayer } from '../holds/recent-releases';
import { SEMAPHORE_RELEASE } from '../scripts/catalog';
import { MAX_LEASE_MS } from '../util/validation';
import type { PermitKeys } from './permit-keys';

/**
 * How one semaphore's holds are given back (semaphore-release-7.lua): a release, or a wait that ended
 * leaving the queue. Made once per semaphore and shared by its acquisitions, it is also what the
 * client keeps for a few seconds after each release, to send it again after a failover (see
 * RecentReleases): a small record of the semaphore, where the acquisition itself (a PermitLock, made
 * per acquisition, with its wait's state and its lock machinery) would be kept alive that long, and
 * a hot semaphore's thousands of them carried into the old generation for the collector to sweep.
 */
export class PermitReleases implements ReleaseReplayer {
  constructor(
    private readonly engine: EngineContext,
    private readonly keys: PermitKeys,
    /** The limit the semaphore was configured with (one stored by setPermits wins over it). */
    private readonly configuredLimit: number,
    private readonly acceptanceLease: number,
  ) {}

  /**
   * Gives `member`'s permits back; with `leavingClient` (that client's ended wait), its entry leaves
   * the queue too. Remembered for an operation timeout (no caller waits longer for the reply): a
   * repeat of the same release (an ioredis client re-sends it after a lost reply) still replies 'released'.
   */
  send(member: string, leavingClient: string): Promise<'released' | 'not-locked'> {
    const { redis, publishCommand, operationTimeout, idleKeyTtl } = this.engine;
    return SEMAPHORE_RELEASE.run(redis, this.keys, {
      member,
      configuredLimit: this.configuredLimit,
      publish: publishCommand,
      memoryMs: Math.min(Math.ceil(operationTimeout), MAX_LEASE_MS),
      acceptanceLease: this.acceptanceLease,
      idleKeyTtl,
      leavingClient,
    });
  }

  /** A release sent again after a failover: it names its member, so it can never touch another hold. */
  async replayRelease(holder: string): Promise<void> {
    await this.send(holder, '');
  }
}
