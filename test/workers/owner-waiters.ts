// Fair-lock waiters with explicit owners, driven by the test over stdin: `enqueue <lock name> <id>
// <owner as JSON>` starts a wait (up to WAIT_MS) for that owner (JSON null: a scope of its own). Once
// it holds the lock it checks that nobody else is inside and that Redis shows no other holder, adds
// one to a counter with a GET and a later SET (lost updates show any overlap), appends <id> to the
// order list, and releases. What it finds wrong goes to the problems list. These keys are
// `<DATA_PREFIX>:<lock name>:inside|counter|order|problems`, so each lock name is a trial of its own.
import { createInterface } from 'node:readline';
import { runInLockScope } from '../../lib';
import { fairOptions, sleep, workerClient } from './worker-client';

async function main(): Promise<void> {
  const { redis, locks } = await workerClient();
  const holdMs = Number(process.env.HOLD_MS ?? 20);
  const waitTime = Number(process.env.WAIT_MS ?? 30_000);

  const holdOnce = async (name: string, id: string, owner: string | undefined): Promise<void> => {
    const data = `${process.env.DATA_PREFIX}:${name}`;
    const [insideKey, counterKey, orderKey, problemsKey] = ['inside', 'counter', 'order', 'problems'].map(
      (what) => `${data}:${what}`,
    );
    const handle = await locks.getFairLock(name, fairOptions()).tryLock({ owner, waitTime });
    if (!handle) return void (await redis.rpush(problemsKey, `${id}: no lock within ${waitTime} ms`));
    try {
      if ((await redis.incr(insideKey)) !== 1) await redis.rpush(problemsKey, `${id}: another holder was inside`);
      const others = (await locks.inspect(name)).holders.filter((h) => h.owner !== handle.owner);
      if (others.length > 0) await redis.rpush(problemsKey, `${id}: Redis also shows ${JSON.stringify(others)}`);
      const count = Number(await redis.get(counterKey));
      await sleep(holdMs);
      await redis.set(counterKey, String(count + 1));
      await redis.rpush(orderKey, id);
      await redis.decr(insideKey);
    } finally {
      const outcome = await handle.release().catch((error: Error) => error.message);
      if (outcome !== 'released') await redis.rpush(problemsKey, `${id}: its release found ${outcome}`);
    }
  };

  const running: Promise<void>[] = [];
  console.log('ready');
  for await (const line of createInterface({ input: process.stdin })) {
    const [command, name, id] = line.split(' ', 3);
    if (command === 'enqueue') {
      const owner = JSON.parse(line.slice(`enqueue ${name} ${id} `.length)) as string | null;
      running.push(runInLockScope(() => holdOnce(name, id, owner ?? undefined), { newScope: true }));
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
