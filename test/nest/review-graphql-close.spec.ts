import { ApolloDriver, type ApolloDriverConfig } from '@nestjs/apollo';
import { Module, type INestApplication } from '@nestjs/common';
import { Args, Field, GraphQLModule, ID, ObjectType, Parent, Query, ResolveField, Resolver } from '@nestjs/graphql';
import { Test } from '@nestjs/testing';
import { DistributedLock, RedisLockModule } from '../../lib';
import { eventually, testPrefix } from '../support/engine';
import { holderElsewhere, listen, lockOptions, within } from './nest-support';

const prefix = testPrefix();
const state = { queried: 0, ran: 0 };

@ObjectType()
class Shelf {
  @Field(() => ID)
  id!: string;
}

@Resolver(() => Shelf)
class ShelfResolver {
  @Query(() => Shelf)
  shelf(@Args('id') id: string): Shelf {
    state.queried++;
    return { id };
  }

  /** Without fieldResolverEnhancers it locks itself, around the call; no waitTime: until the lock is free. */
  @ResolveField(() => Boolean)
  @DistributedLock({ key: 'shelf:{args.0.id}' })
  stocked(@Parent() shelf: Shelf): boolean {
    state.ran++;
    return shelf.id.length > 0;
  }
}

@Module({
  imports: [
    RedisLockModule.forRoot(lockOptions(prefix, { shutdownTimeout: 1_000 })),
    GraphQLModule.forRoot<ApolloDriverConfig>({
      driver: ApolloDriver,
      autoSchemaFile: true,
      stopOnApplicationShutdown: true,
    }),
  ],
  providers: [ShelfResolver],
})
class AppModule {}

/**
 * A field resolver run without interceptors (no fieldResolverEnhancers) locks itself; it is part of a
 * request in flight as much as a handler is, and closing the HTTP server waits for that request. Its
 * wait for a lock held elsewhere went on until the module's own shutdown hook, which Nest runs after
 * the server has closed: app.close() waited for the other holder (here for ever: with
 * `stopOnApplicationShutdown`, Apollo drains in its shutdown hook. By default it drains in
 * onModuleDestroy, before any hook of this module, and cuts requests still in flight after 10 s).
 */
describe('review: app.close() while a field resolver without interceptors waits for its lock', () => {
  const other = holderElsewhere(prefix);

  it('close ends in bounded time; the resolver never ran; the client gets LOCK_UNAVAILABLE', async () => {
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
    const app: INestApplication = moduleRef.createNestApplication({ logger: false });
    const url = await listen(app);
    const held = await other().locks.getLock('shelf:1').lock({ owner: 'elsewhere' });
    try {
      const response = fetch(`${url}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ query: '{ shelf(id: "1") { id stocked } }' }),
      }).then(
        async (res) => (await res.json()) as { errors?: { extensions?: { code?: string } }[] },
        (error: Error) => ({ failed: error.message }),
      );
      await eventually(() => state.queried === 1);
      await new Promise((resolve) => setTimeout(resolve, 200)); // the field resolver waits for its lock
      const closed = await within(
        app.close().then(() => 'closed'),
        15_000,
      );
      expect(closed).toBe('closed');
      const body = await within(response, 5_000);
      expect(body).toMatchObject({ errors: [{ extensions: { code: 'LOCK_UNAVAILABLE' } }] });
      expect(state.ran).toBe(0);
    } finally {
      await held.release();
      await app.close();
    }
  }, 40_000);
});
