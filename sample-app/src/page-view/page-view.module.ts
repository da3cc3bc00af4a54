import { Module } from '@nestjs/common';
import { CounterStore } from './counter.store';
import { PageViewController } from './page-view.controller';
import { PageViewService } from './page-view.service';
import { RedLockProvider } from './red-lock.provider';

@Module({
  controllers: [PageViewController],
  providers: [CounterStore, PageViewService, RedLockProvider],
  exports: [CounterStore],
})
export class PageViewModule {}
