import { Readable } from 'node:stream';
import {
  Controller,
  Get,
  Injectable,
  Module,
  Param,
  Sse,
  StreamableFile,
  type CallHandler,
  type INestApplication,
  type MessageEvent,
} from '@nestjs/common';
import { ExecutionContextHost } from '@nestjs/core/helpers/execution-context-host';
import { Test } from '@nestjs/testing';
import type Redis from 'ioredis';
import { exhaustMap, from, interval, lastValueFrom, map, type Observable } from 'rxjs';
import request from 'supertest';
import {
  CurrentLock,
  DistributedLock,
  DistributedLockInterceptor,
  LockAcquireTimeoutError,
  LockGraphQLError,
  LockCallCancelledError,
  LockLostError,
  LockService,
  RedisLockModule,
  type ActiveLock,
} from '../../lib';
import { connect, eventually, quietLogger, sleep, testPrefix } from '../support/engine';
import { listen, lockKey, lockOptions, openRequest } from './nest-support';

/**
 * The holder's belief is always true, as Nest users meet it (issue 39): a lock is released only when
 * its work has stopped, whatever the handler returns; where the library must give a lock up under
 * running work (shutdown), the work's signal aborts first; sibling branches of one request exclude
 * each other.
 */
const prefix = testPrefix();

/** Runs of one piece of work, and how many overlapped: the property every case here guards. */
class Work {
  active = 0;
  most = 0;
  runs = 0;
  finished = 0;
  signals: AbortSignal[] = [];

  async run(ms: number, signal?: AbortSignal): Promise<string> {
    this.most = Math.max(this.most, ++this.active);
    this.runs++;
    if (signal) this.signals.push(signal);
    await sleep(ms);
    this.active--;
    this.finished++;
    return 'done';
  }
}

let work = new Work();

@Injectable()
class Settlement {
  constructor(private readonly locks: LockService) {}

  @DistributedLock({ key: 'settle:{0}' })
  async settle(id: number): Promise<number> {
    await work.run(150);
    // A call from inside the critical section re-enters (it would wait for itself otherwise).
    return this.audit(id);
  }

  @DistributedLock({ key: 'settle:{0}', waitTime: 0 })
  async audit(_id: number): Promise<number> {
    return this.locks.reentrant(`settle:${_id}`).getHoldCount();
  }

  @DistributedLock({ key: 'job:{0}' })
  async job(_id: string, ms: number): Promise<string> {
    const signal = this.locks.current()!.signal;
    return work.run(ms, signal);
  }
}

@Controller()
class BeliefController {
  constructor(private readonly settlement: Settlement) {}

  @Get('settle-twice/:id')
  @DistributedLock({ key: 'request:{params.id}' }) // the request runs in a lock scope of its own
  async settleTwice(@Param('id') id: string): Promise<number[]> {
    return Promise.all([this.settlement.settle(Number(id)), this.settlement.settle(Number(id))]);
  }

  @Sse('report/:id')
  @DistributedLock({ key: 'report:{params.id}' })
  report(@CurrentLock() lock: ActiveLock): Observable<MessageEvent> {
    // An Observable over a promise: unsubscribing does not stop the promise.
    return from(work.run(600, lock.signal)).pipe(map((data) => ({ data })));
  }

  @Sse('steps/:id')
  @DistributedLock({ key: 'steps:{params.id}' })
  steps(): Observable<MessageEvent> {
    // Ticks start steps, one at a time, each outliving many ticks: a disconnect mid-step must wait for it.
    return interval(20).pipe(
      exhaustMap(() => from(work.run(400))),
      map((data) => ({ data })),
    );
  }

  @Get('file/:id')
  @DistributedLock({ key: 'file:{params.id}' })
  file(): StreamableFile {
    // A slow stream: sent after the handler returned, so the lock must outlive the handler.
    let sent = 0;
    const stream = new Readable({
      read() {
        setTimeout(() => this.push(sent++ < 8 ? `chunk ${sent}\n` : null), 50);
      },
    });
    return new StreamableFile(stream);
  }
}

@Module({
  imports: [RedisLockModule.forRoot(lockOptions(prefix))],
  controllers: [BeliefController],
  providers: [Settlement],
})
class AppModule {}

const open = openRequest;

describe("the holder's belief in Nest", () => {
  let app: INestApplication;
  let url: string;
  let redis: Redis;
  const exists = async (name: string) => (await redis.exists(lockKey(prefix, name))) === 1;

  beforeAll(async () => {
    redis = connect();
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
    app = moduleRef.createNestApplication({ logger: false });
    url = await listen(app);
  });
  beforeEach(() => (work = new Work()));
  afterAll(async () => {
    await app?.close();
    await redis.quit();
  });

  it('Promise.all over a decorated method inside one request: the two calls exclude each other', async () => {
    const response = await request(app.getHttpServer()).get('/settle-twice/7').expect(200);
    expect(response.body).toEqual([2, 2]); // each re-entered from inside its own section
    expect(work.runs).toBe(2);
    expect(work.most).toBe(1);
  });

  it('SSE over a promise: a disconnect aborts the signal, but the lock stays until the promise settles', async () => {
    const first = open(`${url}/report/1`);
    await eventually(() => work.runs === 1);
    first.request.destroy();
    await eventually(() => work.signals[0]?.aborted === true);
    expect(work.signals[0].reason).toBeInstanceOf(LockCallCancelledError);
    expect(await exists('report:1')).toBe(true); // the work still runs under it
    const second = open(`${url}/report/1`);
    await second.received('data:');
    expect(work.runs).toBe(2);
    expect(work.most).toBe(1); // the second stream's work never ran beside the first's
    second.request.destroy();
    await eventually(async () => work.finished === 2 && !(await exists('report:1')), 5_000);
  });

  it('SSE whose ticks start steps: a disconnect mid-step keeps the lock until the step ends, and stops the ticks', async () => {
    const first = open(`${url}/steps/1`);
    await eventually(() => work.runs === 1);
    await sleep(100);
    first.request.destroy();
    const second = open(`${url}/steps/1`);
    await eventually(() => work.runs >= 2, 5_000);
    expect(work.most).toBe(1);
    second.request.destroy();
    await eventually(async () => !(await exists('steps:1')), 5_000);
    const runs = work.runs;
    await sleep(200);
    expect(work.runs).toBe(runs); // no tick of either stream runs any more
  });

  it('a StreamableFile keeps the lock while it is sent, and until a disconnect destroys it', async () => {
    const whole = open(`${url}/file/1`);
    await whole.received('chunk 1'); // the handler has returned; the stream is being sent
    expect(await exists('file:1')).toBe(true);
    await whole.received('chunk 8');
    await eventually(async () => !(await exists('file:1')), 2_000);

    const cut = open(`${url}/file/2`);
    await cut.received('chunk 1');
    expect(await exists('file:2')).toBe(true);
    cut.request.destroy();
    await eventually(async () => !(await exists('file:2')), 5_000);
  });

  it('GraphQL-style handlers (context type graphql) lock, exclude and get LockGraphQLError over the typed error', async () => {
    const interceptor = app.get(DistributedLockInterceptor);
    class Resolver {
      @DistributedLock({ key: 'post:{args.1.id}', waitTime: 100 })
      async updatePost(_root: unknown, _args: { id: number }): Promise<string> {
        return work.run(300);
      }
    }
    const resolver = new Resolver();
    const call = (id: number) => {
      const args = [{}, { id }, { req: {} }, { fieldName: 'updatePost' }];
      const context = new ExecutionContextHost(args, Resolver, resolver.updatePost);
      context.setType('graphql');
      const next: CallHandler = { handle: () => from(resolver.updatePost(args[0], args[1] as { id: number })) };
      return lastValueFrom(interceptor.intercept(context, next));
    };
    const results = await Promise.allSettled([call(3), call(3)]);
    expect(results.map((r) => r.status).sort()).toEqual(['fulfilled', 'rejected']);
    const rejected = results.find((r) => r.status === 'rejected') as PromiseRejectedResult;
    expect(rejected.reason).toBeInstanceOf(LockGraphQLError); // extensions.code for the client, not an HTTP exception
    expect((rejected.reason as LockGraphQLError).extensions.code).toBe('LOCK_BUSY');
    expect((rejected.reason as Error).cause).toBeInstanceOf(LockAcquireTimeoutError);
    expect(work.most).toBe(1);
    expect(await exists('post:3')).toBe(false);
  });
});

describe('app.close() with a job mid-run', () => {
  it('past shutdownTimeout: the job hears LockLostError (closed) on its signal while Redis still holds its lock, and the log says so', async () => {
    const redis = connect();
    const warnings: string[] = [];
    const logger = { ...quietLogger, warn: (message: string) => void warnings.push(message) };
    const moduleRef = await Test.createTestingModule({
      imports: [RedisLockModule.forRoot(lockOptions(prefix, { shutdownTimeout: 200, logger }))],
      providers: [Settlement],
    }).compile();
    const app = await moduleRef.createNestApplication({ logger: false }).init();
    work = new Work();
    const running = app.get(Settlement).job('nightly', 1_500);
    await eventually(() => work.signals.length === 1);
    const signal = work.signals[0];
    let lockedAtAbort: number | undefined;
    const heard = new Promise<void>((resolve) =>
      signal.addEventListener('abort', () => {
        void redis.exists(lockKey(prefix, 'job:nightly')).then((n) => ((lockedAtAbort = n), resolve()));
      }),
    );
    await app.close();
    expect(signal.aborted).toBe(true);
    await heard;
    expect(signal.reason).toBeInstanceOf(LockLostError);
    expect((signal.reason as LockLostError).reason).toBe('closed');
    expect(lockedAtAbort).toBe(1); // told before the lock went
    expect(warnings.some((w) => w.includes('still ran 200 ms into shutdown'))).toBe(true);
    expect(warnings.some((w) => w.includes('job:nightly') && w.includes('closing'))).toBe(true);
    expect(await redis.exists(lockKey(prefix, 'job:nightly'))).toBe(0);
    await running;
    await redis.quit();
  });
});
