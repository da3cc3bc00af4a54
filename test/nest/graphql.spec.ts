import { ApolloDriver, type ApolloDriverConfig } from '@nestjs/apollo';
import { Logger, Module, type INestApplication, type LoggerService } from '@nestjs/common';
import {
  Args,
  Field,
  GraphQLModule,
  ID,
  Int,
  Mutation,
  ObjectType,
  Parent,
  Query,
  ResolveField,
  Resolver,
} from '@nestjs/graphql';
import { Test } from '@nestjs/testing';
import type Redis from 'ioredis';
import { DistributedLock, LockService, RedisLockModule, RedisUnavailableError } from '../../lib';
import { connect, testPrefix } from '../support/engine';
import { gate, listen, lockOptions, racyIncrement } from './nest-support';
import { capturingLogger, recordingLockLogger } from './transport-support';

// Two Apollo (code-first) instances over one Redis: the resolvers' locks exclude across them, and lock
// failures reach the client as GraphQL codes, not INTERNAL_SERVER_ERROR, nor as Nest ERROR logs.

const prefix = testPrefix();
let redis: Redis;
const ran = { busy: 0, badKey: 0 };
const transportLogs = recordingLockLogger();

@ObjectType()
class Account {
  @Field(() => ID)
  id!: string;
}

@Resolver(() => Account)
class CounterResolver {
  @Mutation(() => Int)
  @DistributedLock({ key: 'counter:{args.id}' })
  increment(@Args('id') id: string): Promise<number> {
    return racyIncrement(redis, `${prefix}:count:${id}`);
  }

  /** The handler's arguments by index (root, args, context, info) still work. */
  @Mutation(() => Int)
  @DistributedLock({ key: 'counter:{args.1.id}' })
  incrementByIndex(@Args('id') id: string): Promise<number> {
    return racyIncrement(redis, `${prefix}:count:${id}`);
  }

  @Mutation(() => Boolean)
  @DistributedLock({ key: 'held:{args.id}', waitTime: 0 })
  busy(@Args('id') id: string): boolean {
    ran.busy++;
    return id.length > 0;
  }

  @Query(() => Boolean)
  @DistributedLock({ key: 'item:{args.id}' })
  item(@Args('id', { nullable: true }) id?: string): boolean {
    ran.badKey++;
    return id !== undefined;
  }

  @Query(() => Boolean)
  @DistributedLock({
    key: () => {
      throw new RedisUnavailableError('down', 'lock', 3_000, undefined, '10.0.0.1:6379');
    },
  })
  unavailable(): boolean {
    return true;
  }

  @Query(() => Boolean)
  @DistributedLock({ key: 'bug' })
  bug(): boolean {
    throw new Error('a bug in the resolver');
  }

  @Query(() => Account)
  account(@Args('id') id: string): Account {
    return { id };
  }

  /** A field resolver: its parent is args.0 (with or without fieldResolverEnhancers). */
  @ResolveField(() => Int)
  @DistributedLock({ key: 'account:{args.0.id}' })
  visits(@Parent() account: Account): Promise<number> {
    return racyIncrement(redis, `${prefix}:visits:${account.id}`);
  }

  @ResolveField(() => Boolean)
  @DistributedLock({ key: 'held:{args.0.id}', waitTime: 0 })
  guarded(@Parent() account: Account): boolean {
    ran.busy++;
    return account.id.length > 0;
  }
}

/** The application; `fieldResolverEnhancers: ['interceptors']` unless `enhanced` is false. */
function appModule(enhanced: boolean): new () => object {
  @Module({
    imports: [
      RedisLockModule.forRoot(lockOptions(prefix, { logger: transportLogs })),
      GraphQLModule.forRoot<ApolloDriverConfig>({
        driver: ApolloDriver,
        autoSchemaFile: true,
        ...(enhanced ? { fieldResolverEnhancers: ['interceptors'] as const } : {}),
      }),
    ],
    providers: [CounterResolver],
  })
  class AppModule {}
  return AppModule;
}

interface GraphQLResponse {
  data?: Record<string, unknown> | null;
  errors?: { message: string; extensions?: Record<string, unknown> }[];
}

async function graphql(url: string, query: string, variables: Record<string, unknown> = {}): Promise<GraphQLResponse> {
  const response = await fetch(`${url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ query, variables }),
  });
  return (await response.json()) as GraphQLResponse;
}

describe('@DistributedLock on GraphQL resolvers (Apollo, two instances)', () => {
  const apps: INestApplication[] = [];
  const urls: string[] = [];
  const nestLogger: LoggerService & { error: jest.Mock } = capturingLogger();

  beforeAll(async () => {
    redis = await connect();
    // Two instances, and a third whose field resolvers run without interceptors.
    for (let i = 0; i < 3; i++) {
      const moduleRef = await Test.createTestingModule({ imports: [appModule(i < 2)] }).compile();
      const app = moduleRef.createNestApplication({ logger: nestLogger });
      apps.push(app);
      urls.push(await listen(app));
    }
  });

  afterAll(async () => {
    await Promise.all(apps.map((app) => app.close()));
    await redis.quit();
    Logger.overrideLogger(false);
  });

  beforeEach(() => {
    nestLogger.error.mockClear();
    transportLogs.clear();
  });

  it('serialises a racy mutation across both instances, by {args.id} and by {args.1.id}', async () => {
    const calls = Array.from({ length: 24 }, (_, i) =>
      graphql(urls[i % 2], `mutation($id: String!) { ${i % 3 ? 'increment' : 'incrementByIndex'}(id: $id) }`, {
        id: 'a',
      }),
    );
    const results = await Promise.all(calls);
    expect(results.flatMap((r) => r.errors ?? [])).toEqual([]);
    expect(await redis.get(`${prefix}:count:a`)).toBe('24');
    expect(results.map((r) => Object.values(r.data!)[0]).sort((x, y) => Number(x) - Number(y))).toEqual(
      Array.from({ length: 24 }, (_, i) => i + 1),
    );
  });

  it('locks a field resolver across instances with and without fieldResolverEnhancers', async () => {
    const calls = Array.from({ length: 18 }, (_, i) =>
      graphql(urls[i % 3], 'query($id: String!) { account(id: $id) { id visits } }', { id: 'v' }),
    );
    const results = await Promise.all(calls);
    expect(results.flatMap((r) => r.errors ?? [])).toEqual([]);
    expect(await redis.get(`${prefix}:visits:v`)).toBe('18');
  });

  it('answers a busy field resolver with LOCK_BUSY, with and without fieldResolverEnhancers', async () => {
    const held = gate();
    const entered = gate();
    const holding = apps[0].get(LockService).withLock('held:f', () => (entered.open(), held.promise));
    await entered.promise;
    try {
      for (const url of [urls[1], urls[2]]) {
        const result = await graphql(url, 'query { account(id: "f") { id guarded } }');
        expect(result.errors).toHaveLength(1);
        expect(result.errors![0].extensions).toMatchObject({ code: 'LOCK_BUSY', lock: 'held:f' });
      }
    } finally {
      held.open();
      await holding;
    }
    expect(ran.busy).toBe(0);
    expect(nestLogger.error).not.toHaveBeenCalled();
    expect(transportLogs.lines.debug).toEqual([
      expect.stringContaining('CounterResolver.guarded: LOCK_BUSY'),
      expect.stringContaining('CounterResolver.guarded: LOCK_BUSY'),
    ]);
  });

  it('locks a resolver called directly (not by Nest) over its own arguments', async () => {
    const resolvers = apps.map((app) => app.get(CounterResolver));
    await Promise.all(Array.from({ length: 12 }, (_, i) => resolvers[i % 2].visits({ id: 'w' })));
    expect(await redis.get(`${prefix}:visits:w`)).toBe('12');
    const held = gate();
    const entered = gate();
    const holding = apps[0].get(LockService).withLock('held:y', () => (entered.open(), held.promise));
    await entered.promise;
    try {
      const busy = resolvers[1].busy(...(graphqlCall({ id: 'y' }) as [string]));
      await expect(busy).rejects.toMatchObject({
        name: 'LockGraphQLError',
        extensions: { code: 'LOCK_BUSY', lock: 'held:y' },
      });
    } finally {
      held.open();
      await holding;
    }
    expect(ran.busy).toBe(0);
  });

  it('answers a busy lock with LOCK_BUSY, the lock and retryAfterMs, without running the resolver or logging an error', async () => {
    const held = gate();
    const entered = gate();
    const holding = apps[0].get(LockService).withLock('held:x', () => (entered.open(), held.promise));
    await entered.promise;
    try {
      const result = await graphql(urls[1], 'mutation { busy(id: "x") }');
      expect(result.data).toBeNull();
      expect(result.errors).toHaveLength(1);
      expect(result.errors![0].extensions).toMatchObject({
        code: 'LOCK_BUSY',
        error: 'LockAcquireTimeoutError',
        lock: 'held:x',
        statusCode: 409,
      });
      expect(result.errors![0].extensions!.retryAfterMs).toEqual(expect.any(Number));
      expect(result.errors![0].extensions!.retryAfterMs).toBeGreaterThan(0);
      expect(result.errors![0].message).toContain('held:x');
    } finally {
      held.open();
      await holding;
    }
    expect(ran.busy).toBe(0);
    expect(nestLogger.error).not.toHaveBeenCalled();
    expect(transportLogs.lines.debug).toEqual([expect.stringContaining('CounterResolver.busy: LOCK_BUSY')]);
    expect(transportLogs.lines.errors).toEqual([]);
    expect((await graphql(urls[1], 'mutation { busy(id: "x") }')).data).toEqual({ busy: true });
  });

  it('answers a missing key value with BAD_USER_INPUT, without running the resolver or logging an error', async () => {
    const result = await graphql(urls[0], 'query { item }');
    expect(result.errors).toHaveLength(1);
    expect(result.errors![0].extensions).toMatchObject({
      code: 'BAD_USER_INPUT',
      error: 'LockKeyError',
      placeholder: '{args.id}',
      statusCode: 400,
    });
    expect(ran.badKey).toBe(0);
    expect(nestLogger.error).not.toHaveBeenCalled();
    expect(transportLogs.lines.debug).toEqual([expect.stringContaining('CounterResolver.item: BAD_USER_INPUT')]);
  });

  it('answers Redis unavailable with LOCK_UNAVAILABLE and a message that does not name Redis, logged at warn', async () => {
    const result = await graphql(urls[0], 'query { unavailable }');
    expect(result.errors![0].extensions).toMatchObject({
      code: 'LOCK_UNAVAILABLE',
      error: 'RedisUnavailableError',
      statusCode: 503,
    });
    expect(result.errors![0].message).not.toContain('10.0.0.1');
    expect(nestLogger.error).not.toHaveBeenCalled();
    expect(transportLogs.lines.warnings).toEqual([expect.stringContaining('10.0.0.1:6379')]);
  });

  it("leaves a resolver's own error alone: INTERNAL_SERVER_ERROR, logged as Nest's ERROR", async () => {
    const result = await graphql(urls[0], 'query { bug }');
    expect(result.errors![0].extensions!.code).toBe('INTERNAL_SERVER_ERROR');
    expect(nestLogger.error).toHaveBeenCalledTimes(1);
  });
});

/** The arguments graphql-js passes a resolver that has no parameter decorators: (root, args, context, info). */
function graphqlCall(args: Record<string, unknown>): unknown[] {
  return [undefined, args, {}, {}];
}
