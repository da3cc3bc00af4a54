import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import { AppModule } from './app.module.js';

/**
 * One instance of the example app. PORT (default 0: any free port) and REDIS_HOST / REDIS_PORT come
 * from the environment; the test starts two instances on one Redis and reads the port from stdout.
 */
async function bootstrap(): Promise<void> {
  const app = await NestFactory.create(AppModule, { logger: ['error', 'warn'] });
  app.enableShutdownHooks();
  await app.listen(Number(process.env.PORT ?? 0), '127.0.0.1');
  console.log(`listening on ${await app.getUrl()}`);
}

void bootstrap();
