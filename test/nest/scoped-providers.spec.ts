import { Controller, Get, Injectable, Module, Param, Scope, type INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import request from 'supertest';
import { DistributedLock, RedisLockModule } from '../../lib';
import { connect, testPrefix } from '../support/engine';
import { lockKey, lockOptions } from './nest-support';

/**
 * @DistributedLock on providers that are not singletons: a request-scoped one (an instance per request)
 * and a transient one (an instance per consumer, made at bootstrap). Each call locks, through the
 * application that made the instance, also with two applications in one process.
 */
const redis = connect();
afterAll(() => redis.quit());

/** Whether the lock `name` is held in Redis under `prefix` (read from inside the locked call). */
const heldIn = async (prefix: string, name: string) => (await redis.exists(lockKey(prefix, name))) === 1;

@Injectable({ scope: Scope.REQUEST })
class PerRequestService {
  static prefix = '';
  @DistributedLock({ key: 'per-request:{0}' })
  async work(id: string): Promise<string> {
    return (await heldIn(PerRequestService.prefix, `per-request:${id}`)) ? 'locked' : 'not locked';
  }
}

@Injectable({ scope: Scope.TRANSIENT })
class TransientService {
  @DistributedLock({ key: 'transient:{0}' })
  async work(id: string, prefix: string): Promise<string> {
    return (await heldIn(prefix, `transient:${id}`)) ? 'locked' : 'not locked';
  }
}

/** Two consumers, each given its own TransientService (the first is request-scoped through PerRequestService). */
@Controller()
class FirstController {
  constructor(
    private readonly perRequest: PerRequestService,
    private readonly transient: TransientService,
  ) {}

  @Get('req/:id')
  req(@Param('id') id: string): Promise<string> {
    return this.perRequest.work(id);
  }

  @Get('first/:prefix/:id')
  first(@Param('prefix') prefix: string, @Param('id') id: string): Promise<string> {
    return this.transient.work(id, prefix);
  }
}

@Controller()
class SecondController {
  constructor(private readonly transient: TransientService) {}

  @Get('second/:prefix/:id')
  second(@Param('prefix') prefix: string, @Param('id') id: string): Promise<string> {
    return this.transient.work(id, prefix);
  }
}

async function start(prefix: string): Promise<INestApplication> {
  @Module({
    imports: [RedisLockModule.forRoot(lockOptions(prefix))],
    controllers: [FirstController, SecondController],
    providers: [PerRequestService, TransientService],
  })
  class AppModule {}
  const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
  const app = moduleRef.createNestApplication({ logger: ['error'] });
  await app.init();
  return app;
}

describe('@DistributedLock on request-scoped and transient providers', () => {
  it('a request-scoped provider locks at each call', async () => {
    const prefix = testPrefix();
    PerRequestService.prefix = prefix;
    const app = await start(prefix);
    try {
      await request(app.getHttpServer()).get('/req/1').expect(200, 'locked');
    } finally {
      await app.close();
    }
  });

  it('a transient provider locks at each call, in every consumer that was given one', async () => {
    const prefix = testPrefix();
    const app = await start(prefix);
    try {
      await request(app.getHttpServer()).get(`/first/${prefix}/1`).expect(200, 'locked');
      await request(app.getHttpServer()).get(`/second/${prefix}/1`).expect(200, 'locked');
    } finally {
      await app.close();
    }
  });

  it('two applications in one process: each transient instance made at bootstrap locks through its own application', async () => {
    const [prefixA, prefixB] = [testPrefix(), testPrefix()];
    const [a, b] = [await start(prefixA), await start(prefixB)];
    try {
      // (SecondController is a singleton: its TransientService is made at bootstrap. FirstController is
      // request-scoped through PerRequestService: its instance is told apart by class, one application only.)
      await request(a.getHttpServer()).get(`/second/${prefixA}/2`).expect(200, 'locked');
      await request(b.getHttpServer()).get(`/second/${prefixB}/2`).expect(200, 'locked');
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });
});
