/**
 * Side trial: what one uncontended acquire + release costs Redis, command by command.
 *
 *   npm run build && npx tsx bench/script-trial.ts <port> [iterations] [contenders]
 *
 * against a redis-server already running on <port> (e.g. `npm run redis:up`, port 7400); contenders
 * as in bench/lib/contenders.ts (ours as the compiled package), default
 * `reentrant,fair,simple,redisson-script`. Prints per contender: Redis µs per acquire + release (the
 * top-level script calls in INFO commandstats), the commands its scripts ran inside (calls per
 * acquire + release x µs per call), and the client CPU per acquire + release (process.cpuUsage).
 * The call counts are exact; the µs move with the machine, so compare builds in alternation.
 */
import Redis from 'ioredis';
import { createContender, type ContenderId } from './lib/contenders';

async function main(): Promise<void> {
  const port = Number(process.argv[2]);
  const n = Number(process.argv[3] ?? 5000);
  const ids = (process.argv[4] ?? 'reentrant,fair,simple,redisson-script').split(',') as ContenderId[];
  const redis = new Redis({ port, host: '127.0.0.1' });
  const admin = new Redis({ port, host: '127.0.0.1' });
  const contenders = ids.map((id) => createContender(id, redis));
  await Promise.all(contenders.map((c) => c.ready()));
  for (const c of contenders) {
    const key = `trial:${c.id}:${process.pid}`;
    for (let i = 0; i < 500; i++) await (await c.acquire(key))();
    await admin.config('RESETSTAT');
    const cpu = process.cpuUsage();
    for (let i = 0; i < n; i++) await (await c.acquire(key))();
    const used = process.cpuUsage(cpu);
    const stats = await admin.info('commandstats');
    let usec = 0;
    const inner: string[] = [];
    let innerCalls = 0;
    for (const line of stats.split(/\r?\n/)) {
      const m = /^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/.exec(line);
      if (!m) continue;
      if (m[1] === 'evalsha' || m[1] === 'eval') usec += Number(m[3]);
      else if (m[1] !== 'config|resetstat' && m[1] !== 'info') {
        innerCalls += Number(m[2]);
        inner.push(`${m[1]} ${(Number(m[2]) / n).toFixed(2)}x${(Number(m[3]) / Number(m[2])).toFixed(2)}`);
      }
    }
    console.log(
      `${c.id.padEnd(16)} redis ${(usec / n).toFixed(1)} µs  cpu ${((used.user + used.system) / n).toFixed(0)} µs  inner ${(innerCalls / n).toFixed(1)}: ${inner.join(', ')}`,
    );
  }
  for (const c of contenders) await c.close();
  redis.disconnect();
  admin.disconnect();
}

void main();
