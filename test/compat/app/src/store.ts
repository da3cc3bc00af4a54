import { Injectable, type OnApplicationShutdown } from '@nestjs/common';
import { Redis } from 'ioredis';

/** The app's own data lives in Redis too, on the app's own ioredis client (the one the lock library shares). */
@Injectable()
export class Store implements OnApplicationShutdown {
  readonly redis = new Redis({
    host: process.env.REDIS_HOST ?? '127.0.0.1',
    port: Number(process.env.REDIS_PORT ?? 6379),
    maxRetriesPerRequest: 1,
  });

  constructor() {
    // Redis being down is answered by the lock (503); no need to log every reconnect attempt here.
    this.redis.on('error', () => undefined);
  }

  async readNumber(key: string): Promise<number> {
    return Number((await this.redis.get(key)) ?? 0);
  }

  async writeNumber(key: string, value: number): Promise<void> {
    await this.redis.set(key, String(value));
  }

  onApplicationShutdown(): void {
    this.redis.disconnect();
  }
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
