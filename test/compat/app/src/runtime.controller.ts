import { Controller, Get } from '@nestjs/common';
import { Redis } from 'ioredis';
import { LockService } from 'nestjs-redis-lock';

/** What this instance runs on, for the test to check it tests what it means to. */
@Controller('runtime')
export class RuntimeController {
  constructor(private readonly locks: LockService) {}

  @Get()
  runtime(): { moduleSystem: string; sharedIoredis: boolean } {
    return {
      moduleSystem: typeof require === 'function' ? 'commonjs' : 'esm',
      // One ioredis in the app: the lock library's connection is an instance of the app's Redis class.
      sharedIoredis: this.locks.client.redis instanceof Redis,
    };
  }
}
