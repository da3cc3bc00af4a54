import 'reflect-metadata';
import { Controller, Get, Inject, Module, type INestApplication } from '@nestjs/common';
import { HealthCheck, HealthCheckService, TerminusModule } from '@nestjs/terminus';
import { Test } from '@nestjs/testing';
import request from 'supertest';
import { LockService, RedisLockModule, type RedisLockModuleOptions } from '../../lib';
import { RedisLockHealthIndicator } from '../../lib/health';
import {
  portShift,
  restartNode,
  startTopology,
  stopNode,
  stopTopology,
  type RunningTopology,
} from '../../scripts/redis-topology';
import { eventually } from '../support/engine';
import { listen } from './nest-support';
import { PRIVATE_PORTS } from '../../scripts/test-ports';

/**
 * The terminus health indicator (`nestjs-redis-lock/health`) against a real Redis that goes down and
 * comes back: private single server on 7226, since it is stopped here.
 */
/** Private port (scripts/redis-topology.ts); the server listens on it moved by REDIS_TOPOLOGY_PORT_SHIFT. */
const BASE_PORT = PRIVATE_PORTS.nestHealth.base;
const PORT = BASE_PORT + portShift();

@Controller('health')
class HealthController {
  constructor(
    @Inject(HealthCheckService) private readonly health: HealthCheckService,
    @Inject(RedisLockHealthIndicator) private readonly locks: RedisLockHealthIndicator,
  ) {}

  @Get()
  @HealthCheck()
  check() {
    return this.health.check([() => this.locks.isHealthy()]);
  }
}

/** An app with the health endpoint over the lock module on the private single server, with `options` besides. */
async function healthApp(options: Partial<RedisLockModuleOptions>): Promise<INestApplication> {
  @Module({
    imports: [
      TerminusModule.forRoot({ logger: false }),
      RedisLockModule.forRoot({
        connection: { type: 'single', host: '127.0.0.1', port: PORT },
        logger: { warn: () => undefined, error: () => undefined },
        ...options,
      }),
    ],
    controllers: [HealthController],
    providers: [RedisLockHealthIndicator],
  })
  class AppModule {}
  const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
  const app = moduleRef.createNestApplication({ logger: false });
  await listen(app);
  return app;
}

describe('RedisLockHealthIndicator (@nestjs/terminus)', () => {
  let topology: RunningTopology;
  let app: INestApplication;

  beforeAll(async () => {
    topology = await startTopology('single', { basePort: BASE_PORT, name: 'health' });
    app = await healthApp({ keyPrefix: 'health', watchdogTimeout: 3_000 });
  }, 60_000);
  afterAll(async () => {
    await app?.close();
    if (topology) await stopTopology(topology);
  });

  it('is up with details, down (503) while Redis is stopped, and up again once it is back', async () => {
    const server = app.getHttpServer();
    const up = await request(server).get('/health');
    expect(up.status).toBe(200);
    expect(up.body.status).toBe('ok');
    const details = up.body.info['redis-lock'];
    expect(details.status).toBe('up');
    expect(details.redis).toMatchObject({ healthy: true, status: 'ready' });
    expect(details.redis.pingMs).toBeGreaterThanOrEqual(0);
    expect(details.watchdog).toEqual({ healthy: true, watchedLocks: 0, lagMs: 0 });

    // A watched lock is held through the outage: the watchdog shows it.
    const held = await app.get(LockService).lock('through-the-outage');
    await stopNode(topology, PORT);
    const down = await request(server).get('/health');
    expect(down.status).toBe(503);
    const downDetails = down.body.error['redis-lock'];
    expect(downDetails.status).toBe('down');
    expect(downDetails.redis.healthy).toBe(false);
    expect(downDetails.redis.error).toMatch(/Redis|connection|Connection/);
    expect(downDetails.watchdog.watchedLocks).toBe(1);

    await restartNode(topology, PORT);
    await eventually(async () => (await request(server).get('/health')).status === 200, 15_000, 200);
    // The restarted server is empty: the held lock is gone, and its holder is told.
    await eventually(async () => held.signal.aborted, 10_000, 100);
  }, 60_000);
});

/**
 * With RedLock masters (`redLock.masters`): up while a majority of them is healthy, each master's health
 * in the details; down once too few are left to grant. Five private masters on 7192-7196, some stopped.
 */
describe('RedisLockHealthIndicator with RedLock masters', () => {
  const MASTERS_BASE = PRIVATE_PORTS.nestHealthRedLock.base;
  let masters: RunningTopology;
  let single: RunningTopology;
  let app: INestApplication;
  let ports: number[];

  beforeAll(async () => {
    masters = await startTopology('multi', { basePort: MASTERS_BASE, name: 'health-redlock' });
    ports = masters.masters.map((m) => m.port);
    single = await startTopology('single', { basePort: BASE_PORT, name: 'health' });
    app = await healthApp({
      keyPrefix: 'health-redlock',
      operationTimeout: 1_000,
      redLock: { masters: ports.map((port) => ({ type: 'single' as const, host: '127.0.0.1', port })) },
    });
  }, 60_000);
  afterAll(async () => {
    await app?.close();
    if (masters) await stopTopology(masters);
    if (single) await stopTopology(single);
  });

  it('is up while a majority of the masters is healthy (the others down in the details), down (503) below it', async () => {
    const server = app.getHttpServer();
    const all = await request(server).get('/health');
    expect(all.status).toBe(200);
    const { redLock } = all.body.info['redis-lock'];
    expect(redLock).toMatchObject({ healthy: true, quorum: 3, healthyMasters: 5 });
    expect(redLock.masters).toHaveLength(5);
    expect(redLock.masters[0]).toMatchObject({ healthy: true, redis: { healthy: true, status: 'ready' } });

    // Two of five down: RedLock still grants on the other three, so the check passes and says which.
    await stopNode(masters, ports[3]);
    await stopNode(masters, ports[4]);
    await eventually(
      async () => (await request(server).get('/health')).body.info?.['redis-lock']?.redLock?.healthyMasters === 3,
      15_000,
      200,
    );
    const degraded = await request(server).get('/health');
    expect(degraded.status).toBe(200);
    const degradedLock = degraded.body.info['redis-lock'].redLock;
    expect(degradedLock.healthy).toBe(true);
    expect(degradedLock.masters.map((m: { healthy: boolean }) => m.healthy)).toEqual([true, true, true, false, false]);
    await app.get(LockService).withLock('still-granted', () => undefined, { kind: 'redlock', waitTime: 2_000 });

    // Three down: no majority left, no RedLock can be granted.
    await stopNode(masters, ports[2]);
    await eventually(async () => (await request(server).get('/health')).status === 503, 15_000, 200);
    const down = (await request(server).get('/health')).body.error['redis-lock'];
    expect(down.status).toBe('down');
    expect(down.redis.healthy).toBe(true); // the module's own client is fine: RedLock is what fails
    expect(down.redLock).toMatchObject({ healthy: false, quorum: 3, healthyMasters: 2 });

    for (const port of ports.slice(2)) await restartNode(masters, port);
    await eventually(async () => (await request(server).get('/health')).status === 200, 20_000, 200);
  }, 90_000);
});
