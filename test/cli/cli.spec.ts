import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { Cluster } from 'ioredis';
import { LockClient, runInLockScope } from '../../lib';
import { clusterSlot } from '../../lib/engine/redis/cluster-slot';
import { lockClient, quietLogger, testPrefix, type TestClient } from '../support/engine';
import { sharedTopology } from '../support/topologies';

/** The CLI run as a child process against the shared single server and cluster, its output checked. */
const CLI = join(__dirname, '../../lib/cli/main.ts');

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function cli(args: string[], env: Record<string, string>, stdin = ''): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', CLI, ...args], {
      env: { PATH: process.env.PATH, ...env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(stdin);
  });
}

describe('CLI (nestjs-redis-lock inspect | list | unlock)', () => {
  describe('single server', () => {
    const prefix = testPrefix();
    const env = {
      REDIS_URL: `redis://127.0.0.1:${sharedTopology('single').masters[0].port}`,
      REDIS_LOCK_PREFIX: prefix,
    };
    let a: TestClient;

    beforeAll(() => (a = lockClient({ keyPrefix: prefix })));
    afterAll(() => a.close());

    it('inspect: the holder, its holds, the lease and the fencing token; --json gives the same as inspect()', async () => {
      await runInLockScope(async () => {
        const outer = await a.locks.getLock('order:{7}').lock({ leaseTime: 60_000 });
        const inner = await a.locks.getLock('order:{7}').lock({ leaseTime: 60_000 });
        const text = await cli(['inspect', 'order:{7}'], env);
        expect(text.code).toBe(0);
        expect(text.stdout).toContain(`order:{7} (key ${prefix}:{order:%7B7%7D}): held`);
        expect(text.stdout).toContain(`holder ${outer.owner}  holds 2`);
        expect(text.stdout).toMatch(/lease \d+ s left, fencing token \d+/);
        const json = await cli(['inspect', 'order:{7}', '--json'], env);
        const parsed = JSON.parse(json.stdout);
        const direct = await a.locks.inspect('order:{7}');
        expect({ ...parsed, remainingLeaseMs: 0 }).toEqual({ ...direct, remainingLeaseMs: 0 });
        await inner.release();
        await outer.release();
      });
    });

    it('list: held locks matching the pattern, names decoded; free ones left out', async () => {
      const one = await a.locks.getLock('job:1').lock();
      const two = await a.locks.getSimpleLock('job:{2}', { leaseTime: 30_000 }).lock();
      const other = await a.locks.getLock('report:1').lock();
      await (await a.locks.getLock('job:3').lock()).release(); // leaves only its fencing counter
      const listed = await cli(['list', 'job:*', '--json'], env);
      expect(listed.code).toBe(0);
      const seen = JSON.parse(listed.stdout) as { name: string; holdKind: string }[];
      expect(seen.map((i) => [i.name, i.holdKind])).toEqual([
        ['job:1', 'counted'],
        ['job:{2}', 'token'],
      ]);
      const all = await cli(['list'], env);
      expect(all.stdout).toContain('report:1 (key');
      await Promise.all([one.release(), two.release(), other.release()]);
      expect((await cli(['list'], env)).stdout.trim()).toBe('No locks held.');
    });

    it('unlock: refused without --force; asks first and leaves it on "n"; unlocks on "y"', async () => {
      const held = await a.locks.getLock('stuck').lock();
      const refused = await cli(['unlock', 'stuck'], env);
      expect(refused.code).toBe(2);
      expect(refused.stderr).toContain('pass --force');
      const declined = await cli(['unlock', 'stuck', '--force'], env, 'n\n');
      expect(declined.code).toBe(1);
      expect(declined.stderr).toContain(`Force-unlock "stuck" held by ${held.owner}?`);
      expect(await a.locks.getLock('stuck').isLocked()).toBe(true);
      const done = await cli(['unlock', 'stuck', '--force'], env, 'y\n');
      expect(done.code).toBe(0);
      expect(done.stdout).toContain('Unlocked stuck.');
      expect(await a.locks.getLock('stuck').isLocked()).toBe(false);
      expect(await held.release()).toBe('expired');
    });

    it('sweep: keys an earlier version left without a TTL get the idle TTL (--dry-run only lists them); held locks keep theirs', async () => {
      const legacy = [`${prefix}:{legacy:1}:fence`, `${prefix}:{legacy:2}:permits:limit`];
      await a.redis.set(legacy[0], '41');
      await a.redis.set(legacy[1], '3');
      const held = await a.locks.getLock('swept').lock({ leaseTime: 60_000 });
      const dry = await cli(['sweep', '--dry-run', '--json'], env);
      expect(dry.code).toBe(0);
      expect(JSON.parse(dry.stdout)).toEqual({ keys: [...legacy].sort(), ttlMs: 600_000, applied: false });
      expect(await a.redis.pttl(legacy[0])).toBe(-1);
      const swept = await cli(['sweep'], env);
      expect(swept.stdout).toContain('2 keys without a TTL got 600000 ms');
      for (const key of legacy) expect(await a.redis.pttl(key)).toBeGreaterThan(590_000);
      expect(await a.redis.pttl(`${prefix}:{swept}`)).toBeLessThanOrEqual(60_000); // a held lock keeps its lease
      expect((await cli(['sweep'], env)).stdout.trim()).toBe('Every key has a TTL.');
      // The counter's next token is above its old value (and Redis's clock).
      const next = await a.locks.getLock('legacy:1').lock({ leaseTime: 5_000 });
      expect(next.fencingToken).toBeGreaterThan(41);
      await Promise.all([next.release(), held.release()]);
      await a.redis.del(...legacy);
    });

    it('usage errors exit 2 with the usage; an unreachable Redis exits 1 naming the error', async () => {
      const usage = await cli(['frobnicate'], env);
      expect(usage.code).toBe(2);
      expect(usage.stderr).toContain('Usage: nestjs-redis-lock <command>');
      const down = await cli(['inspect', 'x'], {
        ...env,
        REDIS_URL: 'redis://127.0.0.1:7218',
        REDIS_LOCK_OPERATION_TIMEOUT: '200',
      });
      expect(down.code).toBe(1);
      // Three operation timeouts to connect, and the refused connection named.
      expect(down.stderr).toMatch(
        /^RedisUnavailableError: Could not connect to Redis at 127\.0\.0\.1:7218 within 600 ms: connect ECONNREFUSED/,
      );
    });
  });

  describe('cluster', () => {
    const prefix = testPrefix();
    const nodes = sharedTopology('cluster').masters;
    const env = {
      REDIS_DEPLOY_TYPE: 'cluster',
      REDIS_NODES: nodes.map((n) => `${n.host}:${n.port}`).join(','),
      REDIS_LOCK_PREFIX: prefix,
    };

    it('list scans every master; inspect and unlock --yes work on any slot', async () => {
      const cluster = new Cluster(nodes, { redisOptions: { maxRetriesPerRequest: 1 } });
      const locks = new LockClient({ redis: cluster, keyPrefix: prefix, logger: quietLogger });
      try {
        const names = Array.from({ length: 12 }, (_, i) => `shard-${i}`);
        const handles = await Promise.all(names.map((name) => locks.getLock(name).lock()));
        // The names spread over more than one master, so one node's SCAN would not find them all.
        const masters = new Set(names.map((name) => cluster.slots[clusterSlot(locks.getLock(name).keys.lock)][0]));
        expect(masters.size).toBeGreaterThan(1);
        const listed = await cli(['list', 'shard-*', '--json'], env);
        expect(listed.code).toBe(0);
        expect((JSON.parse(listed.stdout) as { name: string }[]).map((i) => i.name)).toEqual([...names].sort());
        const inspected = await cli(['inspect', 'shard-3'], env);
        expect(inspected.stdout).toContain(`holder ${handles[3].owner}  holds 1`);
        const unlocked = await cli(['unlock', 'shard-5', '--force', '--yes'], env);
        expect(unlocked.stdout).toContain('Unlocked shard-5.');
        expect(await locks.getLock('shard-5').isLocked()).toBe(false);
        await Promise.all(handles.map((h) => h.release()));
      } finally {
        await locks.close();
        cluster.disconnect();
      }
    }, 60_000);
  });
});
