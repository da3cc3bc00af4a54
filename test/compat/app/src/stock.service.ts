import { Injectable } from '@nestjs/common';
import { DistributedLock, LockService } from 'nestjs-redis-lock';
import { sleep, Store } from './store.js';

export interface Taken {
  taken: boolean;
  left: number;
  fencingToken?: number;
}

/** Stock of an item: LockService.withLock by hand, and @DistributedLock on a provider method. */
@Injectable()
export class StockService {
  constructor(
    private readonly locks: LockService,
    private readonly store: Store,
  ) {}

  /** Takes one item if any is left (read, pause, write: the lock keeps it from overselling). */
  take(sku: string): Promise<Taken> {
    return this.locks.withLock(`stock:${sku}`, async ({ fencingToken }) => {
      const left = await this.store.readNumber(`stock:${sku}`);
      if (left <= 0) return { taken: false, left };
      await sleep(5);
      await this.store.writeNumber(`stock:${sku}`, left - 1);
      return { taken: true, left: left - 1, fencingToken };
    });
  }

  /** The same lock, taken by the decorator over the method's first argument. */
  @DistributedLock({ key: 'stock:{0}' })
  async restock(sku: string, count: number): Promise<{ left: number; lockName?: string }> {
    await this.store.writeNumber(`stock:${sku}`, count);
    return { left: count, lockName: this.locks.current()?.name };
  }
}
