// Moves one unit between two of the ACCOUNTS (comma-separated names) at random, in a random
// direction, holding both accounts' locks as one MultiLock of LOCK_KIND, for DURATION_MS from
// START_AT. Balances are read then written (GET, then SET: racy without the lock). Prints how many
// transfers it made and each account's net change, so the test can check every balance.
import { MultiLock } from '../../lib';
import { raceStart, sleep, workerClient, workerLock } from './worker-client';

async function main(): Promise<void> {
  const { redis, locks } = await workerClient();
  const accounts = process.env.ACCOUNTS!.split(',');
  const balanceKey = (account: string) => `${process.env.KEY_PREFIX}:balance:{${account}}`;
  const net: Record<string, number> = Object.fromEntries(accounts.map((a) => [a, 0]));
  let transfers = 0;
  await raceStart();
  const until = Date.now() + Number(process.env.DURATION_MS);
  while (Date.now() < until) {
    const from = accounts[Math.floor(Math.random() * accounts.length)];
    const others = accounts.filter((a) => a !== from);
    const to = others[Math.floor(Math.random() * others.length)];
    // Named in the order of the transfer: A->B and B->A name the same locks in opposite orders.
    const both = new MultiLock([workerLock(locks, `account:${from}`), workerLock(locks, `account:${to}`)]);
    await both.withLock(async () => {
      const [a, b] = await Promise.all([redis.get(balanceKey(from)), redis.get(balanceKey(to))]);
      await sleep(Math.random() < 0.3 ? 1 : 0); // widen the race window
      await redis.set(balanceKey(from), String(Number(a) - 1));
      await redis.set(balanceKey(to), String(Number(b) + 1));
    });
    net[from]--;
    net[to]++;
    transfers++;
  }
  await locks.close();
  console.log(JSON.stringify({ transfers, net }));
  process.exit(0);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
