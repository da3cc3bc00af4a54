import { Module } from '@nestjs/common';
import { ScheduleModule } from '@nestjs/schedule';
import { lockOptionsFromEnv, RedisLockModule } from 'nestjs-redis-lock';
import { RedisLockBoardModule } from 'nestjs-redis-lock/board';
import { HealthController } from './health.controller';
import { LocalOnlyGuard } from './local-only.guard';
import { PageViewModule } from './page-view/page-view.module';
import { ReportModule } from './report/report.module';

/**
 * Configuration comes only from the environment (REDIS_DEPLOY_TYPE, the addresses, PORT), read by the
 * library's own parser, so one build runs on single, master-slave, sentinel or cluster Redis.
 */
@Module({
  imports: [
    RedisLockModule.forRootAsync({ useFactory: () => ({ ...lockOptionsFromEnv(), keyPrefix: 'pview-lock' }) }),
    // The lock board at /locks: who holds the page-view lock, who waits, and this instance's events.
    RedisLockBoardModule.forRoot({ route: '/locks', guard: LocalOnlyGuard }),
    ScheduleModule.forRoot(),
    PageViewModule,
    ReportModule,
  ],
  controllers: [HealthController],
})
export class AppModule {}
