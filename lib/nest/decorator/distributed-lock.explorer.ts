import { Inject, Injectable, type OnModuleInit } from '@nestjs/common';
import { DiscoveryService, MetadataScanner } from '@nestjs/core';
import type { InstanceWrapper } from '@nestjs/core/injector/instance-wrapper';
import type { Module } from '@nestjs/core/injector/module';
import { LockOptionsError } from '../../engine/errors';
import { LockClient } from '../../engine/client/lock-client';
import { lockSpecOf } from './lock-spec';
import { RedisLockRuntime } from '../module/redis-lock.runtime';
import { methodBindings } from './method-bindings';
import { lockModulesVisibleFrom } from './visible-lock-modules';
import { DISTRIBUTED_LOCK_METADATA } from '../redis-lock.constants';
import { messages } from '../redis-lock.messages';

/**
 * At bootstrap, finds every `@DistributedLock()` on the application's controllers and providers
 * (as @nestjs/schedule finds its jobs), validates it (a bad key template or time fails `app.init()`
 * naming the class and method) and binds the instances of providers with decorated methods to this
 * application's runtime. Unbinds them once the module has shut down (RedisLockModule calls `unbind`):
 * not in a shutdown hook of its own, which Nest runs before the module's, while the module still waits
 * for locked work that calls decorated methods.
 */
@Injectable()
export class DistributedLockExplorer implements OnModuleInit {
  private explored = false;
  private failure?: unknown;
  private readonly boundInstances: object[] = [];
  private readonly boundClasses: object[] = [];

  constructor(
    @Inject(DiscoveryService) private readonly discovery: DiscoveryService,
    @Inject(MetadataScanner) private readonly scanner: MetadataScanner,
    @Inject(RedisLockRuntime) private readonly runtime: RedisLockRuntime,
    @Inject(LockClient) private readonly client: LockClient,
  ) {
    methodBindings.addPending(this);
  }

  async onModuleInit(): Promise<void> {
    try {
      this.explore();
    } catch (error) {
      // app.init() fails: leave no connection behind.
      await this.client.close();
      throw error;
    }
  }

  /** Forgets this application's instances: after its locked work has ended and its locks are released. */
  unbind(): void {
    methodBindings.removePending(this);
    for (const instance of this.boundInstances.splice(0)) methodBindings.unbindInstance(instance, this.runtime);
    for (const classRef of this.boundClasses.splice(0)) methodBindings.unbindClass(classRef, this.runtime);
  }

  /** Runs once; a validation failure is thrown now and again from onModuleInit. */
  explore(): void {
    if (this.explored) {
      if (this.failure !== undefined) throw this.failure;
      return;
    }
    this.explored = true;
    methodBindings.removePending(this);
    try {
      const providers = this.discovery.getProviders();
      // Every RedisLockModule of the application, and this one: each binds only what can inject it.
      const runtimes = providers.filter((wrapper) => wrapper.token === RedisLockRuntime);
      const lockModules = runtimes.flatMap((wrapper) => wrapper.host ?? []);
      const own = runtimes.find((wrapper) => wrapper.instance === this.runtime)?.host;
      for (const wrapper of [...this.discovery.getControllers(), ...providers]) {
        this.exploreInstance(wrapper, own, lockModules);
      }
    } catch (error) {
      this.failure = error;
      throw error;
    }
  }

  private exploreInstance(wrapper: InstanceWrapper, own: Module | undefined, lockModules: Module[]): void {
    const instance: unknown = wrapper.instance;
    if (!instance || typeof instance !== 'object') return;
    const prototype = Object.getPrototypeOf(instance) as Record<string, unknown> | null;
    if (!prototype) return;
    const classRef = (instance as { constructor: object }).constructor;
    let hasLockedMethods = false;
    let hasLockedHandlers = false;
    for (const name of this.scanner.getAllMethodNames(prototype)) {
      const method = prototype[name];
      if (typeof method !== 'function') continue;
      const spec = lockSpecOf(classRef, method, name);
      if (!spec) continue;
      if (spec.handlerType) hasLockedHandlers = true;
      // A GraphQL resolver may be called without the interceptor (a field resolver): it locks itself then.
      if (!spec.handlerType || spec.handlerType === 'graphql') hasLockedMethods = true;
    }
    if (!hasLockedHandlers && Reflect.getMetadata(DISTRIBUTED_LOCK_METADATA, classRef) !== undefined) {
      throw new LockOptionsError(messages.classLevelWithoutHandlers((classRef as { name: string }).name));
    }
    if (!hasLockedMethods || !this.locksFor(wrapper, own, lockModules)) return;
    if (wrapper.isTransient) {
      // Each consumer has an instance of its own: those made at bootstrap are bound as they are; those
      // a request-scoped consumer gets later, by class (as request-scoped providers are).
      for (const made of wrapper.getStaticTransientInstances()) {
        if (!made || typeof made.instance !== 'object' || made.instance === null) continue;
        methodBindings.bindInstance(made.instance, this.runtime);
        this.boundInstances.push(made.instance);
      }
      methodBindings.bindClass(classRef, this.runtime);
      this.boundClasses.push(classRef);
    } else if (wrapper.isDependencyTreeStatic()) {
      methodBindings.bindInstance(instance, this.runtime);
      this.boundInstances.push(instance);
    } else {
      methodBindings.bindClass(classRef, this.runtime);
      this.boundClasses.push(classRef);
    }
  }

  /**
   * Whether this module locks `wrapper`'s decorated methods: its module can inject this RedisLockModule
   * (as it would inject LockService), and no other one, which would leave the choice to chance.
   */
  private locksFor(wrapper: InstanceWrapper, own: Module | undefined, lockModules: Module[]): boolean {
    if (!own || !wrapper.host) return true;
    const visible = lockModulesVisibleFrom(wrapper.host, lockModules);
    if (!visible.includes(own)) return false;
    if (visible.length > 1) {
      const className = (wrapper.metatype as { name?: string } | null)?.name ?? String(wrapper.name);
      throw new LockOptionsError(messages.ambiguousLockModule(className, visible.length));
    }
    return true;
  }
}
