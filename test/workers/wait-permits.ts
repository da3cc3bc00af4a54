// Waits for one permit of semaphore SEMAPHORE_NAME (PERMITS permits, renewed by the watchdog), prints
// "acquired", then holds it until killed; prints "lost" if the permit is lost meanwhile. On a line
// "release" it releases it and prints "released". It takes a permit of another semaphore first: then it
// knows whether its master has replicas (until it does, a permit handed to it is taken by a call).
import { randomUUID } from 'node:crypto';
import { workerClient } from './worker-client';

async function main(): Promise<void> {
  const { locks } = await workerClient();
  const semaphore = locks.getSemaphore(process.env.SEMAPHORE_NAME!, { permits: Number(process.env.PERMITS) });
  await (await locks.getSemaphore(`warm-up-${randomUUID()}`, { permits: 1 }).acquire()).release();
  console.log('waiting');
  const handle = await semaphore.acquire();
  handle.signal.addEventListener('abort', () => console.log('lost'));
  console.log('acquired');
  process.stdin.on('data', (chunk: Buffer) => {
    if (chunk.toString().split('\n').includes('release')) {
      void handle.release().then(() => console.log('released'));
    }
  });
  setInterval(() => undefined, 1000); // stay alive until killed
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
