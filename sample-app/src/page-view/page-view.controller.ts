import { Controller, Delete, Get, HttpCode, Inject } from '@nestjs/common';
import { DistributedLock } from 'nestjs-redis-lock';
import { COUNTER_KEY } from './counter.store';
import { PageViewService } from './page-view.service';

interface Count {
  count: number;
}

/** The seed's page-view counter in five versions; each GET counts one view. */
@Controller()
export class PageViewController {
  constructor(@Inject(PageViewService) private readonly pageViews: PageViewService) {}

  /** No lock: concurrent requests overwrite each other's updates. */
  @Get('v1/pview')
  async v1(): Promise<Count> {
    return { count: await this.pageViews.countUnlocked() };
  }

  /** An in-process lock: exact in one instance, not across two. */
  @Get('v2/pview')
  async v2(): Promise<Count> {
    return { count: await this.pageViews.countInProcess() };
  }

  /** The distributed (reentrant) lock, by decorator. */
  @Get('v3/pview')
  @DistributedLock({ key: COUNTER_KEY })
  async v3(): Promise<Count> {
    return { count: await this.pageViews.countUnlocked() };
  }

  /** RedLock over five independent masters. */
  @Get('v4/pview')
  async v4(): Promise<Count> {
    return { count: await this.pageViews.countWithRedLock() };
  }

  /** The fair lock: requests are served in arrival order. */
  @Get('v5/pview')
  @DistributedLock({ key: COUNTER_KEY, fair: true })
  async v5(): Promise<Count> {
    return { count: await this.pageViews.countUnlocked() };
  }

  @Get('pview')
  async read(): Promise<Count> {
    return { count: await this.pageViews.read() };
  }

  @Delete('pview')
  @HttpCode(204)
  async reset(): Promise<void> {
    await this.pageViews.reset();
  }
}
