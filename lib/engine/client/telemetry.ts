import {
  createNoopMeter,
  metrics,
  ProxyTracerProvider,
  SpanStatusCode,
  trace,
  type Attributes,
  type MeterProvider,
  type ObservableResult,
  type Span,
  type TracerProvider,
} from '@opentelemetry/api';
import { heldLockId } from '../holds/held-lock';
import type { EventEmitter } from 'node:events';
import type { LockClientEvents, LockKindName } from './lock-events';
import type { LockWaiters } from '../waiting/waiters';

/** The instrumentation scope every metric and span of this library is reported under. */
export const TELEMETRY_SCOPE = 'nestjs-redis-lock';

export interface LockTelemetryOptions {
  /** Default: the global one (`metrics.setGlobalMeterProvider`, an OpenTelemetry SDK's `start()`). */
  meterProvider?: MeterProvider;
  /** Default: the global one. */
  tracerProvider?: TracerProvider;
  /**
   * The `lock.name` attribute of a lock name, or undefined to leave it out. `label` is the
   * acquisition's own bounded name (AcquireOptions.label: `@DistributedLock` passes its key
   * template, such as `order:{params.id}`). Default: the label, never the raw name (`order:42`
   * would give each order its own time series). Return a bounded value, such as `order:*`.
   */
  lockNameAttribute?: (name: string, label: string | undefined) => string | undefined;
}

/** What is wrong with a `telemetry` option (none: usable). */
export function telemetryProblems(telemetry: unknown): string[] {
  if (telemetry === undefined || telemetry === false) return [];
  const name = (telemetry as LockTelemetryOptions | null)?.lockNameAttribute;
  if (typeof telemetry === 'object' && telemetry !== null && (name === undefined || typeof name === 'function')) {
    return [];
  }
  return [
    'telemetry must be false or { meterProvider?, tracerProvider?, lockNameAttribute?: (name, label) => string | undefined }',
  ];
}

/** What telemetry reads of its client (a LockClient): its events, its id and how many locks it holds. */
export interface InstrumentedClient extends EventEmitter<LockClientEvents> {
  readonly clientId: string;
  readonly heldLockCount: number;
}

/**
 * OpenTelemetry metrics and spans for one LockClient (`client`), built on its events. Through
 * `@opentelemetry/api` only: without an SDK registered every instrument is a no-op.
 *
 * Metrics: `lock.wait.duration` and `lock.hold.duration` (histograms, ms), `lock.acquisitions`,
 * `lock.lost` and `lock.renewals` (counters), `lock.held` and `lock.waiters` (gauges, per `lock.client.id`).
 * Spans: `lock acquire` (from the call to its outcome, a child of the caller's span) and `lock held`
 * (from the grant to the last release).
 */
export function instrumentLockClient(
  client: InstrumentedClient,
  waiters: LockWaiters,
  options: LockTelemetryOptions = {},
): () => void {
  const meter = (options.meterProvider ?? metrics.getMeterProvider()).getMeter(TELEMETRY_SCOPE);
  const tracerProvider = options.tracerProvider ?? trace.getTracerProvider();
  // Nothing registered (the API's no-op meter and tracer): listen to nothing, so the lock path does
  // not even build event payloads. The same rule as the metrics API's own: an SDK registered after
  // the client is created is not seen.
  if (isNoopMeter(meter) && isNoopTracerProvider(tracerProvider)) return () => undefined;
  const tracer = tracerProvider.getTracer(TELEMETRY_SCOPE);
  const nameOf = options.lockNameAttribute ?? ((_name, label) => label);
  const base = ({ kind, name, label }: { kind: LockKindName; name: string; label?: string }): Attributes => {
    const lockName = nameOf(name, label);
    return lockName === undefined ? { 'lock.kind': kind } : { 'lock.kind': kind, 'lock.name': lockName };
  };

  const waitDuration = meter.createHistogram('lock.wait.duration', {
    unit: 'ms',
    description: 'From an acquisition call to its outcome (granted or timed out), waiting included.',
  });
  const holdDuration = meter.createHistogram('lock.hold.duration', {
    unit: 'ms',
    description: "From a grant to the owner's last release.",
  });
  const acquisitions = meter.createCounter('lock.acquisitions', {
    description: 'Acquisition outcomes: acquired, reentered, timed_out.',
  });
  const lost = meter.createCounter('lock.lost', { description: 'Held locks lost, by reason.' });
  const renewals = meter.createCounter('lock.renewals', {
    description: "The watchdog's lease renewals, by outcome: renewed, failed.",
  });
  // Per client (one per process as a rule): two clients of one process must not overwrite each other.
  const clientAttributes = { 'lock.client.id': client.clientId };
  const held = meter.createObservableGauge('lock.held', {
    description: 'Locks this client holds (one per lock and owner).',
  });
  const waitingGauge = meter.createObservableGauge('lock.waiters', {
    description: 'Acquisitions of this client waiting for a lock.',
  });
  const observeHeld = (result: ObservableResult): void => result.observe(client.heldLockCount, clientAttributes);
  const observeWaiters = (result: ObservableResult): void => result.observe(waiters.waitingCount, clientAttributes);
  held.addCallback(observeHeld);
  waitingGauge.addCallback(observeWaiters);

  const heldSpans = new Map<string, Span>();

  client.on('acquired', (e) => {
    const attributes = base(e);
    acquisitions.add(1, { ...attributes, 'lock.outcome': e.reentered ? 'reentered' : 'acquired' });
    waitDuration.record(e.waitedMs, { ...attributes, 'lock.outcome': 'acquired' });
    const now = Date.now();
    // A RedLock has no single fencing token (one per master): no attribute rather than a made-up one.
    const token: Attributes = e.fencingToken === undefined ? {} : { 'lock.fencing_token': e.fencingToken };
    tracer
      .startSpan('lock acquire', {
        startTime: now - e.waitedMs,
        attributes: { ...attributes, 'lock.outcome': 'acquired', ...token },
      })
      .end(now);
    if (!e.reentered) {
      heldSpans.set(
        heldLockId(e.name, e.owner),
        tracer.startSpan('lock held', { attributes: { ...attributes, ...token } }),
      );
    }
  });
  client.on('timedOut', (e) => {
    const attributes = { ...base(e), 'lock.outcome': 'timed_out' };
    acquisitions.add(1, attributes);
    waitDuration.record(e.waitedMs, attributes);
    const now = Date.now();
    tracer.startSpan('lock acquire', { startTime: now - e.waitedMs, attributes }).end(now);
  });
  client.on('released', (e) => {
    if (e.outcome === 'decremented') return; // the owner still holds it
    holdDuration.record(e.heldMs, { ...base(e), 'lock.release.outcome': e.outcome });
    const key = heldLockId(e.name, e.owner);
    const span = heldSpans.get(key);
    heldSpans.delete(key);
    span?.setAttribute('lock.release.outcome', e.outcome);
    span?.end();
  });
  client.on('lockLost', (error) => {
    lost.add(1, { 'lock.lost.reason': error.reason });
    const key = heldLockId(error.key ?? '', error.owner);
    const span = heldSpans.get(key);
    heldSpans.delete(key);
    span?.setStatus({ code: SpanStatusCode.ERROR, message: error.message });
    span?.end();
  });
  client.on('renewed', (e) => {
    if (e.renewed > 0) renewals.add(e.renewed, { 'lock.renewal.outcome': 'renewed' });
    if (e.failed > 0) renewals.add(e.failed, { 'lock.renewal.outcome': 'failed' });
  });
  // On close: a closed client must not be observed (and kept alive) by the meter for ever.
  return () => {
    held.removeCallback(observeHeld);
    waitingGauge.removeCallback(observeWaiters);
    for (const span of heldSpans.values()) span.end();
    heldSpans.clear();
  };
}

const NoopMeter = createNoopMeter().constructor;
/** What the global TracerProvider delegates to until an SDK registers one. */
const NoopTracerProvider = new ProxyTracerProvider().getDelegate().constructor;

function isNoopMeter(meter: object): boolean {
  return meter.constructor === NoopMeter;
}

function isNoopTracerProvider(provider: TracerProvider): boolean {
  const delegate = provider instanceof ProxyTracerProvider ? provider.getDelegate() : provider;
  return delegate.constructor === NoopTracerProvider;
}
