/** Helpers shared by the Nest integration tests. */
import { randomUUID } from 'node:crypto';
import * as http from 'node:http';
import { Module, type INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import type Redis from 'ioredis';
import { LockService, RedisLockModule, type RedisLockModuleOptions, type SingleConnectionOptions } from '../../lib';
import { eventually, lockClient, quietLogger, singlePort, type TestClient } from '../support/engine';

/** The shared single server, with a connection name tests can count in CLIENT LIST. */
export function singleConnection(connectionName = `nest-${randomUUID().slice(0, 8)}`): SingleConnectionOptions {
  return { type: 'single', host: '127.0.0.1', port: singlePort(), redisOptions: { connectionName } };
}

/** Module options on the shared single server; quiet logger so expected warnings do not clutter the output. */
export function lockOptions(keyPrefix: string, extra: Partial<RedisLockModuleOptions> = {}): RedisLockModuleOptions {
  return { connection: singleConnection(), keyPrefix, logger: quietLogger, ...extra };
}

/** How many connections named `name` the server has (CLIENT LIST). */
export async function connectionsNamed(redis: Redis, name: string): Promise<number> {
  const list = (await redis.call('CLIENT', 'LIST')) as string;
  return list.split('\n').filter((line) => line.includes(` name=${name} `)).length;
}

/** The lock key of `name` under `prefix`, as the engine writes it (braces and % percent-encoded). */
export function lockKey(prefix: string, name: string): string {
  return `${prefix}:{${name.replace(/[%{}]/g, (c) => '%' + c.charCodeAt(0).toString(16).toUpperCase())}}`;
}

/** Listens on an ephemeral port, so raw sockets and supertest reach the same server. */
export async function listen(app: INestApplication): Promise<string> {
  await app.listen(0, '127.0.0.1');
  return app.getUrl();
}

/** A promise with its resolve function, to hold handlers at a point of the test's choosing. */
export function gate<T = void>(): { promise: Promise<T>; open(value: T): void } {
  let open!: (value: T) => void;
  const promise = new Promise<T>((resolve) => (open = resolve));
  return { promise, open };
}

/** A raw HTTP request the test can cut off (destroy its socket); `received(text)` waits for text in the body. */
export function openRequest(url: string): { request: http.ClientRequest; received(text: string): Promise<void> } {
  const req = http.get(url);
  req.on('error', () => undefined); // destroyed on purpose
  let body = '';
  const waiting = new Set<() => void>();
  req.on('response', (res) => {
    res.on('error', () => undefined);
    res.on('data', (chunk: Buffer) => {
      body += chunk.toString();
      waiting.forEach((check) => check());
    });
  });
  return {
    request: req,
    received: (text) =>
      new Promise<void>((resolve) => {
        const check = () => body.includes(text) && (waiting.delete(check), resolve());
        waiting.add(check);
        check();
      }),
  };
}

/** GET then SET with a turn of the event loop in between: loses updates unless the callers are serialised. */
export async function racyIncrement(redis: Redis, key: string): Promise<number> {
  const value = Number((await redis.get(key)) ?? 0);
  await new Promise((resolve) => setImmediate(resolve));
  await redis.set(key, value + 1);
  return value + 1;
}

/** `promise`, or 'timed out' after `ms`. */
export function within<T>(promise: Promise<T>, ms: number): Promise<T | 'timed out'> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise,
    new Promise<'timed out'>((resolve) => (timer = setTimeout(() => resolve('timed out'), ms))),
  ]).finally(() => clearTimeout(timer));
}

/**
 * Another process's lock client on `prefix` (a holder elsewhere), made before the enclosing describe's
 * tests and closed after them: call the returned function inside a test.
 */
export function holderElsewhere(prefix: string): () => TestClient {
  let client: TestClient | undefined;
  beforeAll(() => {
    client = lockClient({ keyPrefix: prefix });
  });
  afterAll(async () => {
    await client?.close();
  });
  return () => client!;
}

/** Until `name` has a waiting process: the call under test is waiting for the lock held elsewhere. */
export async function untilWaiting(other: TestClient, name: string): Promise<void> {
  await eventually(async () => (await other.locks.inspect(name)).waitingClients.length === 1);
}

/**
 * Only the other holder's hold is on `name`; once it lets go (`held.release()`), nothing of the lock
 * is left in Redis: the wait that was cut short left nothing behind.
 */
export async function expectOnlyElsewhereThenNothing(
  other: TestClient,
  prefix: string,
  name: string,
  held: { release(): Promise<unknown> },
): Promise<void> {
  expect((await other.locks.inspect(name)).holders.map((h) => h.owner)).toEqual(['elsewhere']);
  await held.release();
  expect(await other.redis.exists(lockKey(prefix, name))).toBe(0);
}

/** An application of RedisLockModule alone on `prefix` (no routes), initialised, and its LockService. */
export async function lockServiceApp(prefix: string): Promise<{ app: INestApplication; locks: LockService }> {
  @Module({ imports: [RedisLockModule.forRoot(lockOptions(prefix))] })
  class AppModule {}
  const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
  const app = moduleRef.createNestApplication({ logger: false });
  await app.init();
  return { app, locks: app.get(LockService) };
}
