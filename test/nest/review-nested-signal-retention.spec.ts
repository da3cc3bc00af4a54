import { Injectable, Module, type INestApplicationContext } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { defer, lastValueFrom, Observable, of } from 'rxjs';
import { DistributedLock, LockService, RedisLockModule } from '../../lib';
import { testPrefix } from '../support/engine';
import { lockOptions } from './nest-support';
import { anyKeepsDependants, dependants } from '../support/signal-dependants';

const prefix = testPrefix();

@Injectable()
class Ticker {
  constructor(private readonly locks: LockService) {}

  /** Re-enters the lock its caller holds, and reads the signal (the work's "is my lock still mine?"). */
  @DistributedLock({ key: 'leader' })
  tick(): Observable<boolean> {
    return defer(() => of(this.locks.current()!.signal.aborted));
  }
}

@Module({
  imports: [RedisLockModule.forRoot(lockOptions(prefix))],
  providers: [Ticker],
})
class AppModule {}

/**
 * A decorated method returning an Observable sees its lock's signal combined with its caller's
 * cancellation. Made with AbortSignal.any, each combination stayed referenced from the hold's signal
 * (on Node 20, for good): nested calls re-entering one long-held lock (a leader's loop) kept one per
 * call, about 60 bytes, for as long as the lock was held.
 */
describe('review: nested decorated Observable calls reading lock.signal inside one long-held lock', () => {
  let app: INestApplicationContext;

  beforeAll(async () => {
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
    app = await moduleRef.init();
  });
  afterAll(async () => {
    await app.close();
  });

  it('leave nothing on the hold’s signal, however many ran', async () => {
    // The probe sees what AbortSignal.any keeps on this Node (else this test would prove nothing).
    expect(anyKeepsDependants()).toBe(true);

    const ticker = app.get(Ticker);
    const left = await app.get(LockService).withLock('leader', async (lock) => {
      for (let i = 0; i < 1_000; i++) expect(await lastValueFrom(ticker.tick())).toBe(false);
      return dependants(lock.signal);
    });
    expect(left).toBe(0);
  }, 60_000);
});
