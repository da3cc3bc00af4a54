import 'reflect-metadata';
import { Controller, Get, Inject, Module, type INestApplication } from '@nestjs/common';
import { HealthCheck, HealthCheckService, TerminusModule } from '@nestjs/terminus';
import { Test } from '@nestjs/testing';
import request from 'supertest';
import { LockService, RedisLockModule } from '../../lib';
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

describe('RedisLockHealthIndicator (@nestjs/terminus)', () => {
  let topology: RunningTopology;
  let app: INestApplication;

  beforeAll(async () => {
    topology = await startTopology('single', { basePort: BASE_PORT, name: 'health' });
    @Module({
      imports: [
        TerminusModule.forRoot({ logger: false }),
        RedisLockModule.forRoot({
          connection: { type: 'single', host: '127.0.0.1', port: PORT },
          keyPrefix: 'health',
          watchdogTimeout: 3_000,
          logger: { warn: () => undefined, error: () => undefined },
        }),
      ],
      controllers: [HealthController],
      providers: [RedisLockHealthIndicator],
    })
    class AppModule {}
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
    app = moduleRef.createNestApplication({ logger: false });
    await listen(app);
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
