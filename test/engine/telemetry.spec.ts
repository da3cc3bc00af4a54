import { trace } from '@opentelemetry/api';
import { MeterProvider, type DataPoint, type Histogram } from '@opentelemetry/sdk-metrics';
import { runInLockScope } from '../../lib';
import { TELEMETRY_SCOPE } from '../../lib/internal';
import { lockClient, sleep, testPrefix, type TestClient } from '../support/engine';
import { OnDemandReader, testSdk } from '../support/telemetry';

type Point = DataPoint<number | Histogram>;

/**
 * OpenTelemetry through a real SDK (in-memory exporters): each metric and span checked against what
 * the test did to the locks.
 */
describe('telemetry', () => {
  const prefix = testPrefix();
  const sdk = testSdk();
  const { reader, meterProvider, spans, tracerProvider } = sdk;
  let a: TestClient;
  let b: TestClient;

  beforeAll(() => {
    sdk.activate();
    const telemetry = {
      meterProvider,
      tracerProvider,
      lockNameAttribute: (name: string) => (name.startsWith('order:') ? 'order:*' : undefined),
    };
    a = lockClient({ keyPrefix: prefix, telemetry, watchdogTimeout: 300 });
    b = lockClient({ keyPrefix: prefix, telemetry, watchdogTimeout: 300 });
  });
  afterAll(async () => {
    await a.close();
    await b.close();
    await sdk.shutdown();
  });

  const collect = async (): Promise<Map<string, Point[]>> => {
    const { resourceMetrics } = await reader.collect();
    const byName = new Map<string, Point[]>();
    for (const scope of resourceMetrics.scopeMetrics) {
      expect(scope.scope.name).toBe(TELEMETRY_SCOPE);
      for (const metric of scope.metrics) byName.set(metric.descriptor.name, metric.dataPoints as Point[]);
    }
    return byName;
  };
  const point = (points: Point[] | undefined, attributes: Record<string, string>): Point | undefined =>
    points?.find((p) => Object.entries(attributes).every(([k, v]) => p.attributes[k] === v));

  it('counts, times and gauges what the locks did', async () => {
    // Reentrant: acquired, re-entered, released after ~100 ms, under a bounded name label.
    await runInLockScope(async () => {
      const outer = await a.locks.getLock('order:1').lock();
      const inner = await a.locks.getLock('order:1').lock();
      await sleep(100);
      await inner.release();
      await outer.release();
    });
    // Fair: a wait of ~200 ms.
    const holder = await a.locks.getFairLock('fair-1').lock();
    const waiting = b.locks.getFairLock('fair-1').lock({ waitTime: 10_000 });
    await sleep(200);
    await holder.release();
    await (await waiting).release();
    // Simple: a refused single attempt.
    const simple = await a.locks.getSimpleLock('simple-1', { leaseTime: 5_000 }).lock();
    expect(await b.locks.getSimpleLock('simple-1').tryLock({ waitTime: 0 })).toBeNull();
    await simple.release();
    // Lost: its key deleted behind its back, then renewed (watchdog every 100 ms) or released.
    const doomed = await a.locks.getLock('doomed').lock();
    await a.redis.del(a.locks.getLock('doomed').keys.lock);
    await sleep(400);
    expect(doomed.signal.aborted).toBe(true);
    // Still held while collecting: the gauge, and at least two renewal rounds.
    const kept = await a.locks.getLock('kept').lock();
    await sleep(350);

    const m = await collect();
    const acquisitions = m.get('lock.acquisitions');
    expect(
      point(acquisitions, { 'lock.kind': 'reentrant', 'lock.outcome': 'acquired', 'lock.name': 'order:*' })?.value,
    ).toBe(1);
    expect(
      point(acquisitions, { 'lock.kind': 'reentrant', 'lock.outcome': 'reentered', 'lock.name': 'order:*' })?.value,
    ).toBe(1);
    expect(point(acquisitions, { 'lock.kind': 'fair', 'lock.outcome': 'acquired' })?.value).toBe(2);
    expect(point(acquisitions, { 'lock.kind': 'simple', 'lock.outcome': 'timed_out' })?.value).toBe(1);
    // No raw name anywhere unless the label function gave one.
    expect(
      acquisitions?.some((p) => p.attributes['lock.name'] !== undefined && p.attributes['lock.name'] !== 'order:*'),
    ).toBe(false);

    const waits = point(m.get('lock.wait.duration'), { 'lock.kind': 'fair', 'lock.outcome': 'acquired' })!
      .value as Histogram;
    expect(waits.count).toBe(2);
    expect(waits.max).toBeGreaterThanOrEqual(200);
    const holds = point(m.get('lock.hold.duration'), { 'lock.kind': 'reentrant', 'lock.name': 'order:*' })!
      .value as Histogram;
    expect(holds.count).toBe(1); // the last release only
    expect(holds.min).toBeGreaterThanOrEqual(100);

    expect(point(m.get('lock.lost'), { 'lock.lost.reason': 'not-owner' })?.value).toBe(1);
    expect(point(m.get('lock.renewals'), { 'lock.renewal.outcome': 'renewed' })?.value).toBeGreaterThanOrEqual(2);
    expect(point(m.get('lock.renewals'), { 'lock.renewal.outcome': 'failed' })?.value).toBeGreaterThanOrEqual(1);
    // Gauges, per client: `a` holds `kept`, nobody waits.
    expect(point(m.get('lock.held'), { 'lock.client.id': a.locks.clientId })?.value).toBe(1);
    expect(
      m
        .get('lock.held')
        ?.map((p) => p.value)
        .sort(),
    ).toEqual([0, 1]);
    expect(m.get('lock.waiters')?.map((p) => p.value)).toEqual([0, 0]);
    await kept.release();
  });

  it('with no SDK registered installs nothing: no listener, so no event payload is ever built', async () => {
    const bare = lockClient({ keyPrefix: prefix });
    const traced = lockClient({ keyPrefix: prefix, telemetry: { tracerProvider } });
    const metered = lockClient({ keyPrefix: prefix, telemetry: { meterProvider } });
    try {
      expect(bare.locks.listenerCount('acquired')).toBe(0);
      expect(bare.locks.listenerCount('released')).toBe(0);
      expect(traced.locks.listenerCount('acquired')).toBe(1);
      expect(metered.locks.listenerCount('acquired')).toBe(1);
      // Still locks as usual.
      await bare.locks.getLock('bare').withLock(() => undefined);
    } finally {
      await bare.close();
      await traced.close();
      await metered.close();
    }
  });

  it("lock.name: the acquisition's label by default, never the raw name; a function sees both", async () => {
    const labelReader = new OnDemandReader();
    const labelMeters = new MeterProvider({ readers: [labelReader] });
    const seen: [string, string | undefined][] = [];
    const byDefault = lockClient({ keyPrefix: prefix, telemetry: { meterProvider: labelMeters } });
    const custom = lockClient({
      keyPrefix: prefix,
      telemetry: {
        meterProvider: labelMeters,
        lockNameAttribute: (name, label) => (seen.push([name, label]), label && `custom:${label}`),
      },
    });
    try {
      for (const id of [1, 2]) {
        await byDefault.locks.getLock(`invoice:${id}`).withLock(() => undefined, { label: 'invoice:{id}' });
      }
      await byDefault.locks.getFairLock('unlabelled:1').withLock(() => undefined);
      await custom.locks.getSimpleLock('receipt:9').withLock(() => undefined, { label: 'receipt:{id}' });
      const { resourceMetrics } = await labelReader.collect();
      const acquisitions = resourceMetrics.scopeMetrics
        .flatMap((scope) => scope.metrics)
        .find((metric) => metric.descriptor.name === 'lock.acquisitions')!.dataPoints as Point[];
      const series = acquisitions.map((p) => [p.attributes['lock.kind'], p.attributes['lock.name'], p.value]);
      expect(series).toEqual(
        expect.arrayContaining([
          ['reentrant', 'invoice:{id}', 2],
          ['fair', undefined, 1],
          ['simple', 'custom:receipt:{id}', 1],
        ]),
      );
      expect(series).toHaveLength(3);
      expect(seen).toContainEqual(['receipt:9', 'receipt:{id}']);
      // A label that is not a bounded string is refused before any Redis call.
      await expect(byDefault.locks.getLock('x').lock({ label: '' })).rejects.toMatchObject({
        name: 'LockOptionsError',
        key: 'x',
      });
    } finally {
      await byDefault.close();
      await custom.close();
      await labelMeters.shutdown();
    }
  });

  it("spans: 'lock acquire' under the caller's span, 'lock held' until the last release", async () => {
    spans.reset();
    const tracer = tracerProvider.getTracer('test');
    let parentId = '';
    await tracer.startActiveSpan('request', async (request) => {
      parentId = request.spanContext().spanId;
      await a.locks.getLock('traced').withLock(async () => sleep(50));
      expect(await b.locks.getSimpleLock('busy-traced').tryLock({ waitTime: 0 })).not.toBeNull();
      expect(await a.locks.getSimpleLock('busy-traced').tryLock({ waitTime: 100 })).toBeNull();
      request.end();
    });
    expect(trace.getActiveSpan()).toBeUndefined();
    const finished = spans.getFinishedSpans().filter((s) => s.instrumentationScope.name === TELEMETRY_SCOPE);
    const acquires = finished.filter((s) => s.name === 'lock acquire');
    expect(acquires.map((s) => [s.attributes['lock.kind'], s.attributes['lock.outcome']])).toEqual([
      ['reentrant', 'acquired'],
      ['simple', 'acquired'],
      ['simple', 'timed_out'],
    ]);
    for (const span of acquires) expect(span.parentSpanContext?.spanId).toBe(parentId);
    const timedOut = acquires[2];
    const waitedMs =
      (timedOut.endTime[0] - timedOut.startTime[0]) * 1e3 + (timedOut.endTime[1] - timedOut.startTime[1]) / 1e6;
    expect(waitedMs).toBeGreaterThanOrEqual(100);
    const held = finished.find((s) => s.name === 'lock held' && s.attributes['lock.kind'] === 'reentrant')!;
    expect(held.attributes['lock.release.outcome']).toBe('released');
    expect(held.parentSpanContext?.spanId).toBe(parentId);
  });
});
