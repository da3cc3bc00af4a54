import { Inject, Injectable, Logger } from '@nestjs/common';
import { Cron } from '@nestjs/schedule';
import { LockAcquireTimeoutError } from 'nestjs-redis-lock';
import { ReportService } from './report.service';

/**
 * A scheduled job on every instance, every second on the wall clock; the lock in ReportService
 * makes it run once per tick across instances. The instance that lost the race skips the tick.
 */
@Injectable()
export class ReportJob {
  private readonly logger = new Logger(ReportJob.name);

  constructor(@Inject(ReportService) private readonly reports: ReportService) {}

  @Cron('* * * * * *')
  async tick(): Promise<void> {
    try {
      await this.reports.publish(Math.floor(Date.now() / 1000));
    } catch (error) {
      if (error instanceof LockAcquireTimeoutError) return; // another instance has this tick
      this.logger.warn(`report failed: ${(error as Error).message}`);
    }
  }
}
