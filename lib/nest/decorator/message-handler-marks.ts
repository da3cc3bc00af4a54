import { Inject, Injectable } from '@nestjs/common';
import { INTERCEPTORS_METADATA } from '@nestjs/common/constants';
import { DiscoveryService, MetadataScanner } from '@nestjs/core';
import { HandlerCallInterceptor } from './handler-call.interceptor';
import { handlerTypeOf } from './lock-spec';

// Stateless and the same for every application: an instance, which Nest uses as it is (a class named
// in metadata added after the scan would have to be one of the module's injectables).
const MARK = new HandlerCallInterceptor();

/**
 * Marks every call of a microservice handler (@MessagePattern, @EventPattern) and WebSocket gateway
 * handler (@SubscribeMessage) as a message in flight (see inHandlerCall), as the module's middleware
 * marks HTTP requests: a transport whose close waits for the handlers running (a Kafka consumer's
 * disconnect does) would otherwise wait for a lock held elsewhere. Nest gives gateways no global
 * interceptor, so the mark goes on each handler, as its own interceptor, while the application is being
 * built: before Nest reads the handlers' interceptors (gateways at init, microservices when connected).
 */
@Injectable()
export class MessageHandlerMarks {
  constructor(
    @Inject(DiscoveryService) discovery: DiscoveryService,
    @Inject(MetadataScanner) scanner: MetadataScanner,
  ) {
    for (const wrapper of [...discovery.getControllers(), ...discovery.getProviders()]) {
      // A class provider's or controller's own class; a factory's or value's handlers are not Nest's to call.
      const classRef: unknown = wrapper.inject ? undefined : wrapper.metatype;
      if (typeof classRef !== 'function') continue;
      const prototype = classRef.prototype as Record<string, unknown> | undefined;
      if (!prototype) continue;
      for (const name of scanner.getAllMethodNames(prototype)) {
        const method = prototype[name];
        if (typeof method === 'function') markIfMessageHandler(method);
      }
    }
  }
}

function markIfMessageHandler(method: object): void {
  const type = handlerTypeOf(method);
  if (type !== 'rpc' && type !== 'ws') return;
  const interceptors = (Reflect.getMetadata(INTERCEPTORS_METADATA, method) as unknown[] | undefined) ?? [];
  // Once per method, whatever the number of applications built in the process.
  if (interceptors.some((interceptor) => interceptor instanceof HandlerCallInterceptor)) return;
  Reflect.defineMetadata(INTERCEPTORS_METADATA, [MARK, ...interceptors], method);
}
