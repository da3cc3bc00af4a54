/** A real OpenTelemetry SDK for the telemetry tests: metrics read on demand, spans kept in memory. */
import { context } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';

/** A metric reader that exports when the test collects. */
export class OnDemandReader extends MetricReader {
  protected onForceFlush(): Promise<void> {
    return Promise.resolve();
  }
  protected onShutdown(): Promise<void> {
    return Promise.resolve();
  }
}

export interface TestSdk {
  reader: OnDemandReader;
  meterProvider: MeterProvider;
  spans: InMemorySpanExporter;
  tracerProvider: BasicTracerProvider;
  /** Makes the context manager global (so spans nest under the caller's): call in beforeAll. */
  activate(): void;
  shutdown(): Promise<void>;
}

export function testSdk(): TestSdk {
  const reader = new OnDemandReader();
  const meterProvider = new MeterProvider({ readers: [reader] });
  const spans = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] });
  const contextManager = new AsyncLocalStorageContextManager().enable();
  return {
    reader,
    meterProvider,
    spans,
    tracerProvider,
    activate: () => void context.setGlobalContextManager(contextManager),
    async shutdown() {
      await meterProvider.shutdown();
      await tracerProvider.shutdown();
      context.disable();
    },
  };
}
