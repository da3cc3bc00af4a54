/**
 * The private Redis topologies of the tests and the bench: one base port each (before
 * REDIS_TOPOLOGY_PORT_SHIFT), with the ports it spans, so that two users never collide. The shared
 * topologies (TEST_BASE_PORTS, 7100-7149) and the development ones (DEV_BASE_PORTS, 7400-7449) are in
 * scripts/redis-topology.ts; test/harness/test-ports.spec.ts checks that no two ranges here or there
 * overlap. A cluster node also listens on its port + 10000 (bus): ranges stay below 7500.
 */
export interface PortRange {
  /** The base port its topology (or topologies) start on. */
  readonly base: number;
  /** How many ports from `base` on it uses (or expects nothing to listen on). */
  readonly span: number;
}

const range = (base: number, span: number): PortRange => ({ base, span });

export const PRIVATE_PORTS = {
  /** test/harness/sentinel-failover.spec.ts: a sentinel topology. */
  harnessSentinelFailover: range(7200, 9),
  /** test/harness/lifecycle.spec.ts: a master and its replicas. */
  harnessLifecycle: range(7210, 4),
  /** test/harness/missing-redis.spec.ts: nothing may start there. */
  harnessMissingRedis: range(7219, 1),
  /** test/engine/outage.spec.ts: a single server it restarts. */
  engineOutage: range(7220, 1),
  /** test/connection/replica-sync.spec.ts: a master and its replicas. */
  replicaSync: range(7221, 4),
  /** test/connection/start-up.spec.ts. */
  startUp: range(7225, 1),
  /** test/nest/health.spec.ts. */
  nestHealth: range(7226, 1),
  /** test/faults/reconnect-backoff.spec.ts. */
  reconnect: range(7227, 1),
  /** test/engine/redis-refusals.spec.ts. */
  redisRefusals: range(7228, 1),
  /** test/kinds/red-lock.spec.ts: five masters. */
  redLock: range(7230, 5),
  /** test/connection/sentinel-failover.spec.ts: a sentinel topology (two tests, one after the other). */
  sentinelFailover: range(7240, 9),
  /** test/connection/sentinel-failover.spec.ts: a master and replicas. */
  replicaFailover: range(7250, 4),
  /** test/connection/sentinel-failover.spec.ts: a second sentinel topology. */
  sentinelFailoverSecond: range(7260, 9),
  /** test/faults/sentinel-kill.spec.ts. */
  faultSentinelKill: range(7270, 9),
  /** test/faults/sentinel-pause.spec.ts. */
  faultSentinelPause: range(7280, 9),
  /** test/faults/cluster-kill.spec.ts. */
  faultClusterKill: range(7290, 6),
  /** test/faults/cluster-masters.spec.ts: a cluster one of whose masters it kills. */
  faultClusterMasters: range(7150, 6),
  /** test/compat/compat.spec.ts. */
  compat: range(7299, 1),
  /** bench/run.ts: the bench's own single server. */
  bench: range(7300, 1),
  /** test/faults/single-restart.spec.ts. */
  faultSingleRestart: range(7310, 1),
  /** test/faults/pubsub-kill.spec.ts. */
  faultPubsubKill: range(7320, 1),
  /** test/faults/paused-holder.spec.ts. */
  faultPausedHolder: range(7330, 1),
  /** test/faults/redlock.spec.ts: five masters. */
  faultRedLock: range(7340, 5),
  /** bench/scenarios/red-lock.ts: five masters. */
  benchRedLock: range(7350, 5),
  /** bench/scenarios/failover.ts: the kill fault's sentinel topology. */
  benchFailoverKill: range(7360, 9),
  /** bench/scenarios/failover.ts: the pause fault's sentinel topology. */
  benchFailoverPause: range(7370, 9),
  /** bench/redlock-compare.ts: five masters. */
  benchRedLockCompare: range(7380, 5),
  /** test/kinds/semaphore-hand-over.spec.ts: a single server whose writes one test pauses (CLIENT PAUSE). */
  semaphoreHandOver: range(7180, 1),
  /** test/kinds/red-lock-truth.spec.ts: five masters, three of which one test pauses. */
  redLockTruth: range(7182, 5),
  /** test/connection/failover-review.spec.ts: a master and its replicas, one promoted by hand. */
  failoverReview: range(7176, 4),
  /** test/kinds/red-lock-review.spec.ts: five masters, whose scripts one test flushes. */
  redLockReview: range(7165, 5),
  /** test/kinds/red-lock-restart.spec.ts: five masters, one of which each test restarts empty. */
  redLockRestart: range(7187, 5),
  /** test/nest/health.spec.ts: five RedLock masters, some of which it stops. */
  nestHealthRedLock: range(7192, 5),
  /** test/model/: the model test's topology. */
  model: range(7386, 1),
  /** bench/cpu-per-process.ts. */
  benchCpuPerProcess: range(7390, 1),
  /** test/nest/multi-key-and-redlock.spec.ts: 7396, then 7397-7399 where nothing may listen. */
  lateRedLock: range(7396, 4),
  /** test/connection/managed-redis.spec.ts: TLS-only, password-protected single, sentinel, cluster. */
  managedSingle: range(7450, 1),
  managedSentinel: range(7460, 9),
  managedCluster: range(7470, 6),
  /** test/connection/mutual-tls.spec.ts: mutual-TLS cluster, single, sentinel. */
  mutualTlsCluster: range(7480, 6),
  mutualTlsSingle: range(7486, 1),
  mutualTlsSentinel: range(7490, 9),
} as const satisfies Record<string, PortRange>;
