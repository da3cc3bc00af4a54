import type { LockRegistry } from '../holds/lock-registry';
import type { RecentReleases } from '../holds/recent-releases';
import type { LockLogger } from '../util/logger';
import type { PublishCommand, RedisClient } from '../redis/redis-client';
import type { LockWaiters } from '../waiting/waiters';
import type { ReplicaSync } from '../redis/replica-sync';
import type { EmitLockEvent } from './lock-events';
import type { ProcessTurns } from '../turns/process-turns';
import type { Watchdog } from '../holds/watchdog';
import type { ClosingWaits } from '../waiting/closing-waits';

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
  /**
   * How long a process's waiters go without hearing anything before they try again (QUIET_RECHECK_MS).
   * Not an option: tests of who is woken lengthen it (through engineOf) to tell a wake-up from a re-check.
   */
  quietRecheckMs: number;
  readonly replicaSync: ReplicaSync;
  /** See LockClientEvents. */
  readonly lockEvent: EmitLockEvent;
  /** The acquisitions still running, which close() ends first (see ClosingWaits). */
  readonly waits: ClosingWaits;
}
