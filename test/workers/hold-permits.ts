// Takes one permit of semaphore SEMAPHORE_NAME (PERMITS permits, renewed by the watchdog), prints
// "acquired", then holds it until killed; prints "lost" if the permit is lost meanwhile.
import { workerClient } from './worker-client';

async function main(): Promise<void> {
  const { locks } = await workerClient();
  const semaphore = locks.getSemaphore(process.env.SEMAPHORE_NAME!, { permits: Number(process.env.PERMITS) });
  const handle = await semaphore.acquire();
  handle.signal.addEventListener('abort', () => console.log('lost'));
  console.log('acquired');
  setInterval(() => undefined, 1000); // stay alive until killed
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
