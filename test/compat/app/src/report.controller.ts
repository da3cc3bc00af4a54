import { Controller, Param, Post, Query } from '@nestjs/common';
import { DistributedLock } from 'nestjs-redis-lock';
import { sleep } from './store.js';

/** A report that takes a while to build: one build per name at a time, across every instance. */
@Controller('report')
export class ReportController {
  /** Holds the report's lock for `ms` milliseconds (a long build). */
  @Post(':name/hold')
  @DistributedLock({ key: 'report:{params.name}' })
  async hold(@Param('name') name: string, @Query('ms') ms: string): Promise<{ held: string }> {
    await sleep(Number(ms));
    return { held: name };
  }

  /** Does not wait: while another build of this report runs anywhere, answers 409 with Retry-After. */
  @Post(':name')
  @DistributedLock({ key: 'report:{params.name}', waitTime: 0 })
  build(@Param('name') name: string): { built: string } {
    return { built: name };
  }
}
