import { Controller, Get, Injectable, Param, type INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import request from 'supertest';
import { trace } from '@opentelemetry/api';
import type { DataPoint } from '@opentelemetry/sdk-metrics';
import { DistributedLock, LockOptionsError, RedisLockModule } from '../../lib';
import { compileLockSpec, TELEMETRY_SCOPE } from '../../lib/internal';
import { testPrefix } from '../support/engine';
import { testSdk } from '../support/telemetry';
import { lockOptions } from './nest-support';

@Controller('orders')
class OrdersController {
  @Get(':id')
  @DistributedLock({ key: 'order:{params.id}' })
  get(@Param('id') id: string) {
    return { id };
  }
}

@Injectable()
class ReportJob {
  @DistributedLock({ key: 'report:{0}', label: 'nightly-report' })
  async run(_tenant: string): Promise<string> {
    return 'done';
  }

  @DistributedLock({ key: (tenant: string) => `export:${tenant}` })
  async exportAll(_tenant: string): Promise<string> {
    return 'exported';
  }
}

/**
 * The module's `telemetry` option reaches the engine, and decorated calls label their metrics with
 * the key template (bounded: one series for every order), through a real OpenTelemetry SDK.
 */
describe('RedisLockModule telemetry', () => {
  const prefix = testPrefix();
  const sdk = testSdk();
  const { reader, meterProvider, spans, tracerProvider } = sdk;
  let app: INestApplication;

  beforeAll(async () => {
    sdk.activate();
    const moduleRef = await Test.createTestingModule({
      imports: [RedisLockModule.forRoot(lockOptions(prefix, { telemetry: { meterProvider, tracerProvider } }))],
      controllers: [OrdersController],
      providers: [ReportJob],
    }).compile();
    app = moduleRef.createNestApplication({ logger: false });
    await app.init();
  });
  afterAll(async () => {
    await app?.close();
    await sdk.shutdown();
  });

  it('labels decorated locks with their key template, or the label option, never the raw name', async () => {
    for (const id of ['17', '18', '19']) {
      await request(app.getHttpServer()).get(`/orders/${id}`).expect(200);
    }
    const job = app.get(ReportJob);
    const tracer = tracerProvider.getTracer('test');
    let cronSpanId = '';
    await tracer.startActiveSpan('cron', async (cron) => {
      cronSpanId = cron.spanContext().spanId;
      expect(await job.run('acme')).toBe('done');
      cron.end();
    });
    expect(await job.exportAll('acme')).toBe('exported');

    const { resourceMetrics } = await reader.collect();
    const scope = resourceMetrics.scopeMetrics.find((s) => s.scope.name === TELEMETRY_SCOPE)!;
    const acquisitions = scope.metrics.find((m) => m.descriptor.name === 'lock.acquisitions')!
      .dataPoints as DataPoint<number>[];
    const series = acquisitions.map((p) => [p.attributes['lock.name'], p.attributes['lock.outcome'], p.value]);
    expect(series).toEqual(
      expect.arrayContaining([
        ['order:{params.id}', 'acquired', 3],
        ['nightly-report', 'acquired', 1],
        [undefined, 'acquired', 1], // a key function has no template: no name at all
      ]),
    );
    expect(series).toHaveLength(3);

    const finished = spans.getFinishedSpans().filter((s) => s.instrumentationScope.name === TELEMETRY_SCOPE);
    const jobAcquire = finished.find(
      (s) => s.name === 'lock acquire' && s.attributes['lock.name'] === 'nightly-report',
    );
    expect(jobAcquire?.parentSpanContext?.spanId).toBe(cronSpanId);
    const held = finished.filter((s) => s.name === 'lock held' && s.attributes['lock.name'] === 'order:{params.id}');
    expect(held.map((s) => s.attributes['lock.release.outcome'])).toEqual(['released', 'released', 'released']);
    expect(trace.getActiveSpan()).toBeUndefined();
  });

  it('refuses a bad telemetry option or decorator label when the module is built, before connecting', async () => {
    await expect(
      Test.createTestingModule({
        imports: [
          RedisLockModule.forRoot(lockOptions(prefix, { telemetry: { lockNameAttribute: 'order:*' } as never })),
        ],
      }).compile(),
    ).rejects.toThrow(/telemetry must be false or/);
    expect(() => compileLockSpec({ key: 'a:{0}', label: '' }, 'Job.run')).toThrow(LockOptionsError);
    expect(() => compileLockSpec({ key: 'a:{0}', label: 7 }, 'Job.run')).toThrow(/label must be a string/);
    expect(compileLockSpec({ key: 'a:{0}' }, 'Job.run').label).toBe('a:{0}');
  });
});
