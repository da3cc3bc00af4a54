import { ApolloDriver, type ApolloDriverConfig } from '@nestjs/apollo';
import { Module, type INestApplication } from '@nestjs/common';
import { Args, Field, ObjectType, Parent, Query, ResolveField, Resolver } from '@nestjs/graphql';
import { GraphQLModule } from '@nestjs/graphql';
import { Test } from '@nestjs/testing';
import { DistributedLock, LockService, RedisLockModule } from '../../lib';
import { testPrefix } from '../support/engine';
import { holderElsewhere, listen, lockOptions, within, untilWaiting } from './nest-support';

const prefix = testPrefix();
const state = { ran: 0 };

@ObjectType()
class Shelf {
  @Field()
  id!: string;
}

@Resolver()
class ShelfResolver {
  constructor(private readonly locks: LockService) {}

  /** No waitTime: until the lock is free. */
  @Query(() => Boolean)
  @DistributedLock({ key: 'shelf:{args.id}' })
  stocked(@Args('id') _id: string): boolean {
    state.ran++;
    return true;
  }

  @Query(() => Boolean)
  async restock(@Args('id') id: string): Promise<boolean> {
    return this.locks.withLock(`shelf:${id}`, () => (state.ran++, true));
  }

  @Query(() => Shelf)
  shelf(@Args('id') id: string): Shelf {
    return { id };
  }
}

/** A field resolver: Nest runs no interceptor on it (no fieldResolverEnhancers here). */
@Resolver(() => Shelf)
class ShelfFieldsResolver {
  constructor(private readonly locks: LockService) {}

  @ResolveField(() => Boolean)
  async restocked(@Parent() shelf: Shelf): Promise<boolean> {
    return this.locks.withLock(`shelf:${shelf.id}`, () => (state.ran++, true));
  }
}

@Module({
  imports: [
    RedisLockModule.forRoot(lockOptions(prefix, { shutdownTimeout: 1_000 })),
    // Apollo's default (stopOnApplicationShutdown: false): it drains the HTTP server in onModuleDestroy,
    // before any hook of this (global) module, and cuts requests still in flight after 10 s.
    GraphQLModule.forRoot<ApolloDriverConfig>({ driver: ApolloDriver, autoSchemaFile: true }),
  ],
  providers: [ShelfResolver, ShelfFieldsResolver],
})
class AppModule {}

/**
 * A resolver waiting for a lock is a request in flight; Apollo's drain waits for it. By default it
 * drains in GraphQLModule's onModuleDestroy, which Nest runs before every hook of RedisLockModule
 * (global modules' hooks run last): the wait ended only when Apollo's 10 s grace cut the connection.
 */
describe("review: app.close() with Apollo's default stopOnApplicationShutdown while a resolver waits", () => {
  const other = holderElsewhere(prefix);

  it.each([
    ['@DistributedLock', 'stocked(id: "1")', 1, 'LOCK_UNAVAILABLE'],
    ['LockService.withLock', 'restock(id: "2")', 2, 'INTERNAL_SERVER_ERROR'], // LockModuleClosedError, not caught
    ['a field resolver, LockService.withLock', 'shelf(id: "3") { restocked }', 3, 'INTERNAL_SERVER_ERROR'],
  ])(
    '%s: close ends well before Apollo’s grace; the resolver never ran; the client gets its error',
    async (_how, selection, id, code) => {
      state.ran = 0;
      const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
      const app: INestApplication = moduleRef.createNestApplication({ logger: false });
      const url = await listen(app);
      const held = await other().locks.getLock(`shelf:${id}`).lock({ owner: 'elsewhere' });
      try {
        const response = fetch(`${url}/graphql`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ query: `{ ${selection} }` }),
        }).then(
          async (res) => (await res.json()) as { errors?: { extensions?: { code?: string } }[] },
          (error: Error) => ({ failed: error.message }),
        );
        await untilWaiting(other(), `shelf:${id}`);
        const started = Date.now();
        const closed = await within(
          app.close().then(() => 'closed'),
          20_000,
        );
        expect(closed).toBe('closed');
        // Apollo's grace is 10 s; the module's drain bound 1 s, with room for a noisy machine.
        expect(Date.now() - started).toBeLessThan(6_000);
        const body = await within(response, 5_000);
        expect(body).toMatchObject({ errors: [{ extensions: { code } }] });
        expect(state.ran).toBe(0);
      } finally {
        await held.release();
        await app.close();
      }
    },
    40_000,
  );
});
