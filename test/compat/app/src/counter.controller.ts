import { Controller, Get, Param, Post } from '@nestjs/common';
import { DistributedLock } from 'nestjs-redis-lock';
import { sleep, Store } from './store.js';

/**
 * A page-view counter kept as a plain Redis string and updated in two steps (GET, pause, SET): without
 * the lock, concurrent requests on any instance overwrite each other's increments.
 */
@Controller('counter')
export class CounterController {
  constructor(private readonly store: Store) {}

  @Post(':name/increment')
  @DistributedLock({ key: 'counter:{params.name}' })
  async increment(@Param('name') name: string): Promise<{ value: number }> {
    const value = (await this.store.readNumber(`counter:${name}`)) + 1;
    await sleep(5);
    await this.store.writeNumber(`counter:${name}`, value);
    return { value };
  }

  @Get(':name')
  async read(@Param('name') name: string): Promise<{ value: number }> {
    return { value: await this.store.readNumber(`counter:${name}`) };
  }
}
