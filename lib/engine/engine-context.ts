import type { LockRegistry } from './lock-registry';
import type { RecentReleases } from './recent-releases';
import type { LockLogger } from './logger';
import type { PublishCommand, RedisClient } from './redis-client';
import type { LockWaiters } from './waiters';
import type { ReplicaSync } from './replica-sync';
import type { EmitLockEvent } from './lock-events';
import type { ProcessTurns } from './process-turns';
import type { Watchdog } from './watchdog';

/**
 * What every lock kind shares from its client: one copy of identity, waiting, watchdog, held locks and
 * settings. The client makes one and keeps it private (see engineOf).
 */
export interface EngineContext {
  readonly redis: RedisClient;
  readonly clientId: string;
  /** A fresh id for an acquisition attempt's hold (see hold-ids.ts). */
  readonly newHoldId: () => string;
  readonly keyPrefix: string;
  readonly watchdogTimeout: number;
  readonly operationTimeout: number;
  readonly publishCommand: PublishCommand;
  readonly waiters: LockWaiters;
  readonly watchdog: Watchdog;
  readonly registry: LockRegistry;
  readonly recentReleases: RecentReleases;
  readonly turns: ProcessTurns;
  /** How long a name's fencing counter outlives its last grant or renewal, past the lease (ms). */
  readonly idleKeyTtl: number;
  readonly logger: LockLogger;
  readonly replicaSync: ReplicaSync;
  /** See LockClientEvents. */
  readonly lockEvent: EmitLockEvent;
}
