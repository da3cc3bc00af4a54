import { Module } from '@nestjs/common';
import { RedisLockModule } from 'nestjs-redis-lock';
import { CounterController } from './counter.controller.js';
import { ReportController } from './report.controller.js';
import { RuntimeController } from './runtime.controller.js';
import { StockController } from './stock.controller.js';
import { StockService } from './stock.service.js';
import { Store } from './store.js';

@Module({
  imports: [
    RedisLockModule.forRoot({
      connection: {
        type: 'single',
        host: process.env.REDIS_HOST ?? '127.0.0.1',
        port: Number(process.env.REDIS_PORT ?? 6379),
      },
      keyPrefix: 'compat-app',
    }),
  ],
  controllers: [CounterController, ReportController, StockController, RuntimeController],
  providers: [Store, StockService],
})
export class AppModule {}
