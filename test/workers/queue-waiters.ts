// Fair-lock waiters driven by the test over stdin: "enqueue <id>" starts a waiter (its own scope)
// that, once it holds the lock, appends <id> to ORDER_KEY, holds HOLD_MS and releases.
import { createInterface } from 'node:readline';
import { runInLockScope } from '../../lib';
import { fairOptions, sleep, workerClient } from './worker-client';

async function main(): Promise<void> {
  const { redis, locks } = await workerClient();
  const lock = locks.getFairLock(process.env.LOCK_NAME!, fairOptions());
  const holdMs = Number(process.env.HOLD_MS ?? 5);
  const running: Promise<void>[] = [];
  console.log('ready');
  for await (const line of createInterface({ input: process.stdin })) {
    const [command, id] = line.trim().split(' ');
    if (command === 'enqueue') {
      running.push(
        runInLockScope(
          () =>
            lock.withLock(async () => {
              await redis.rpush(process.env.ORDER_KEY!, id);
              await sleep(holdMs);
            }),
          { newScope: true },
        ),
      );
    } else if (command === 'finish') {
      break;
    }
  }
  process.stdin.destroy(); // the test keeps its end open; ours must not keep this process alive
  await Promise.all(running);
  await locks.close(); // closes the worker's connections too
  console.log(JSON.stringify({ done: running.length }));
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
