import {
  Inject,
  Module,
  Optional,
  RequestMethod,
  type BeforeApplicationShutdown,
  type MiddlewareConsumer,
  type NestModule,
  type OnApplicationBootstrap,
  type OnApplicationShutdown,
} from '@nestjs/common';
import { DiscoveryModule, HttpAdapterHost } from '@nestjs/core';
import { engineOf, LockClient } from '../../engine/client/lock-client';
import { DistributedLockExplorer } from '../decorator/distributed-lock.explorer';
import { MessageHandlerMarks } from '../decorator/message-handler-marks';
import { lockClientProviders, RedLockMasters } from './lock-client.provider';
import { LockLifecycle } from './redis-lock.lifecycle';
import { RedisLockRuntime } from './redis-lock.runtime';
import { LockService } from '../service/lock.service';
import { DEFAULT_SHUTDOWN_TIMEOUT, REDIS_LOCK_MODULE_OPTIONS } from '../redis-lock.constants';
import { ConfigurableModuleClass } from './redis-lock.module-definition';
import type { RedisLockModuleOptions } from './redis-lock-module.options';
import { messages } from '../redis-lock.messages';
import { onServerClosing } from './server-closing';
import { markRequestInFlight } from './requests-in-flight';

/**
 * How long closing lets handlers whose waits it cut short answer before Nest closes its servers: enough
 * for a wait to settle (the engine ends it at once, or after one bounded Redis call), not a delay worth
 * noticing when something holds it up.
 */
const HANDLER_ANSWER_GRACE_MS = 1_000;

/**
 * Distributed locks on Redis for a Nest application: provides `LockService` (and the engine's
 * `LockClient`), makes `@DistributedLock()` work on controllers and providers, and owns the Redis
 * connections it opens. Global unless `isGlobal: false`.
 *
 * On shutdown (`app.close()`, or a signal with `enableShutdownHooks()`), after the HTTP server has
 * stopped, it refuses new locks, lets locked work still running finish (up to `shutdownTimeout`),
 * then stops the watchdog, releases the locks this application still holds, best effort (bounded by
 * `operationTimeout`; a lock that cannot be released, e.g. Redis is down, expires with its lease) and
 * closes its connections: `app.close()` leaves no timer or connection behind. A client passed as
 * `{ type: 'client', client }` stays open: it is yours.
 * @example
 * @Module({
 *   imports: [
 *     RedisLockModule.forRoot({ connection: { type: 'single', url: 'redis://localhost:6379' }, waitTime: 5_000 }),
 *     // or: RedisLockModule.forRootAsync({ imports: [ConfigModule], inject: [ConfigService],
 *     //       useFactory: (config: ConfigService) => ({ connection: config.get('redis'), keyPrefix: 'orders' }) }),
 *   ],
 * })
 * export class AppModule {}
 */
@Module({
  imports: [DiscoveryModule],
  providers: [
    ...lockClientProviders,
    LockService,
    LockLifecycle,
    RedisLockRuntime,
    DistributedLockExplorer,
    // Every handler's call is a request or message in flight: its lock waits end as closing starts
    // (HTTP requests: see configure()).
    MessageHandlerMarks,
  ],
  // RedisLockRuntime: for the interceptor, which Nest builds in the module of each decorated controller.
  exports: [LockClient, LockService, REDIS_LOCK_MODULE_OPTIONS, RedisLockRuntime, RedLockMasters],
})
export class RedisLockModule
  extends ConfigurableModuleClass
  implements NestModule, OnApplicationBootstrap, BeforeApplicationShutdown, OnApplicationShutdown
{
  private stopWatchingServer = (): void => undefined;

  constructor(
    @Inject(LockClient) private readonly client: LockClient,
    @Inject(LockLifecycle) private readonly lifecycle: LockLifecycle,
    @Inject(REDIS_LOCK_MODULE_OPTIONS) private readonly options: RedisLockModuleOptions,
    @Inject(RedLockMasters) private readonly redLockMasters: RedLockMasters,
    @Inject(DistributedLockExplorer) private readonly explorer: DistributedLockExplorer,
    @Optional() @Inject(HttpAdapterHost) private readonly adapterHost?: HttpAdapterHost,
  ) {
    super();
  }

  /** Every HTTP request is in flight for shutdown: its lock waits end as closing starts (see markRequestInFlight). */
  configure(consumer: MiddlewareConsumer): void {
    consumer.apply(markRequestInFlight).forRoutes({ path: '{*splat}', method: RequestMethod.ALL });
  }

  /**
   * Handler waits end as soon as anyone starts closing the HTTP server, which waits for requests in
   * flight: Apollo's default drain does so in GraphQLModule's onModuleDestroy, before any hook of this
   * module, and waited 10 s for a resolver waiting for a lock held elsewhere.
   */
  onApplicationBootstrap(): void {
    const server: unknown = this.adapterHost?.httpAdapter?.getHttpServer();
    this.stopWatchingServer = onServerClosing(server, () => {
      // Only a server the application listens on closes for shutdown: supertest over an app that only
      // init()ed listens and closes it around each request.
      if (this.adapterHost?.listening) this.lifecycle.closeHandlerWaits();
    });
  }

  /**
   * Before Nest closes its servers: a request still waiting for its lock ends with 503, since closing
   * the HTTP server waits for every request in flight (a wait for a lock held elsewhere would hang
   * `app.close()`), and the handlers it cut short answer their callers before Nest closes the servers
   * (a socket.io client hears LOCK_UNAVAILABLE before its disconnect). Running handlers keep their
   * locks; providers and LockService keep working.
   */
  async beforeApplicationShutdown(): Promise<void> {
    await this.lifecycle.endHandlerWaits(HANDLER_ANSWER_GRACE_MS);
  }

  /**
   * Nest runs it after the shutdown hooks of the modules that use this one (and after the HTTP
   * server stopped), so their locks work until then. Lets running locked work finish (up to
   * `shutdownTimeout`), then releases what is still held and closes the connections.
   */
  async onApplicationShutdown(): Promise<void> {
    const timeout = this.options.shutdownTimeout ?? DEFAULT_SHUTDOWN_TIMEOUT;
    try {
      // Decorated methods keep working meanwhile: the work being waited for calls them.
      const stillRunning = await this.lifecycle.drain(timeout);
      if (stillRunning > 0) engineOf(this.client).logger.warn(messages.shutdownTimedOut(stillRunning, timeout));
      await Promise.all([this.client, ...this.redLockMasters.clients].map((client) => client.close()));
    } finally {
      this.stopWatchingServer();
      this.explorer.unbind();
    }
  }
}
