/**
 * `@DistributedLock` on a GraphQL `@Subscription` (Apollo, graphql-ws): the resolver returns an async
 * iterator whose events are the work (the GraphQL counterpart of an SSE stream). The lock is held until
 * the iterator finishes or fails, or the client unsubscribes (its signal aborts first).
 */
import { ApolloDriver, type ApolloDriverConfig } from '@nestjs/apollo';
import { Module, type INestApplication } from '@nestjs/common';
import { Args, GraphQLModule, Int, Query, Resolver, Subscription } from '@nestjs/graphql';
import { Test } from '@nestjs/testing';
import { createClient, type Client } from 'graphql-ws';
import type Redis from 'ioredis';
import WebSocket from 'ws';
import { DistributedLock, LockCallCancelledError, LockService, RedisLockModule } from '../../lib';
import { connect, eventually, sleep, testPrefix } from '../support/engine';
import { listen, lockKey, lockOptions } from './nest-support';

const prefix = testPrefix();
let redis: Redis;

/** What the streams saw: at each event whether Redis held the lock and `current()` named it; how they ended. */
const state = {
  active: 0,
  most: 0,
  lockedAtEvent: [] as boolean[],
  currentAtEvent: [] as (string | undefined)[],
  closed: [] as { locked: boolean; reason: unknown }[],
};

@Resolver()
class FeedResolver {
  constructor(private readonly locks: LockService) {}

  @Query(() => Int)
  ping(): number {
    return 1;
  }

  /** `count` events 80 ms apart, or endless with count 0; fails at the third event with fail. */
  @Subscription(() => Int, { resolve: (value: number) => value })
  @DistributedLock({ key: 'feed:{args.id}', waitTime: 10_000 })
  feed(
    @Args('id') id: string,
    @Args('count', { type: () => Int }) count: number,
    @Args('fail', { nullable: true }) fail?: boolean,
  ): AsyncIterator<number> {
    const signal = this.locks.current()!.signal;
    const locks = this.locks;
    const name = `feed:${id}`;
    async function* events(): AsyncGenerator<number> {
      state.most = Math.max(state.most, ++state.active);
      try {
        for (let i = 0; count === 0 || i < count; i++) {
          await sleep(80);
          if (fail && i === 2) throw new Error('feed failed');
          state.lockedAtEvent.push((await redis.exists(lockKey(prefix, name))) === 1);
          state.currentAtEvent.push(locks.current()?.name);
          yield i;
        }
      } finally {
        state.active--;
        if (signal.aborted) {
          state.closed.push({ locked: (await redis.exists(lockKey(prefix, name))) === 1, reason: signal.reason });
        }
      }
    }
    return events();
  }
}

@Module({
  imports: [
    RedisLockModule.forRoot(lockOptions(prefix)),
    GraphQLModule.forRoot<ApolloDriverConfig>({
      driver: ApolloDriver,
      autoSchemaFile: true,
      subscriptions: { 'graphql-ws': true },
    }),
  ],
  providers: [FeedResolver],
})
class AppModule {}

describe('@DistributedLock on a GraphQL subscription', () => {
  let app: INestApplication;
  let url: string;
  const clients: Client[] = [];

  function client(): Client {
    const made = createClient({ url: url.replace('http', 'ws') + '/graphql', webSocketImpl: WebSocket, lazy: true });
    clients.push(made);
    return made;
  }

  /** The events of one subscription to its end; `stopAfter` unsubscribes after that many. */
  function subscribe(query: string, stopAfter?: number): Promise<number[]> {
    const values: number[] = [];
    return new Promise<number[]>((resolve, reject) => {
      const unsubscribe = client().subscribe<{ feed: number }>(
        { query },
        {
          next: (value) => {
            if (value.errors) return reject(new Error(JSON.stringify(value.errors)));
            values.push(value.data!.feed);
            if (values.length === stopAfter) {
              unsubscribe();
              resolve(values);
            }
          },
          error: (error) => reject(error instanceof Error ? error : new Error(JSON.stringify(error))),
          complete: () => resolve(values),
        },
      );
    });
  }

  beforeAll(async () => {
    redis = connect();
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
    app = moduleRef.createNestApplication({ logger: false });
    url = await listen(app);
  });

  afterAll(async () => {
    await Promise.all(clients.map((c) => c.dispose()));
    await app?.close();
    await redis.quit();
  });

  beforeEach(() => {
    state.most = 0;
    state.lockedAtEvent = [];
    state.currentAtEvent = [];
    state.closed = [];
  });

  it('holds the lock while the subscription streams its events, then releases it', async () => {
    const values = await subscribe('subscription { feed(id: "1", count: 5) }');
    expect(values).toEqual([0, 1, 2, 3, 4]);
    expect(state.lockedAtEvent).toEqual([true, true, true, true, true]);
    // The events run in the call's lock scope, as the handler did.
    expect(state.currentAtEvent).toEqual(Array(5).fill('feed:1'));
    await eventually(async () => (await redis.exists(lockKey(prefix, 'feed:1'))) === 0);
  });

  it('two subscribers on one key do not stream at the same time', async () => {
    const both = await Promise.all([
      subscribe('subscription { feed(id: "2", count: 4) }'),
      subscribe('subscription { feed(id: "2", count: 4) }'),
    ]);
    expect(both).toEqual([
      [0, 1, 2, 3],
      [0, 1, 2, 3],
    ]);
    await eventually(() => state.active === 0);
    expect(state.most).toBe(1);
  });

  it('a client that unsubscribes: the signal aborts (LockCallCancelledError) before the lock goes', async () => {
    expect(await subscribe('subscription { feed(id: "3", count: 0) }', 2)).toEqual([0, 1]);
    await eventually(() => state.closed.length === 1);
    expect(state.closed[0].locked).toBe(true);
    expect(state.closed[0].reason).toBeInstanceOf(LockCallCancelledError);
    await eventually(async () => (await redis.exists(lockKey(prefix, 'feed:3'))) === 0);
    // The next subscriber gets the lock.
    expect(await subscribe('subscription { feed(id: "3", count: 1) }')).toEqual([0]);
  });

  it('an iterator that fails releases its lock', async () => {
    await expect(subscribe('subscription { feed(id: "4", count: 5, fail: true) }')).rejects.toThrow(/feed failed/);
    await eventually(async () => (await redis.exists(lockKey(prefix, 'feed:4'))) === 0);
    expect(state.lockedAtEvent).toEqual([true, true]);
  });
});
