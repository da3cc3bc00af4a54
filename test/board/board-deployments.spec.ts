import IORedis, { type Cluster, type Redis } from 'ioredis';
import request from 'supertest';
import { createLockClient, LockClient } from '../../lib';
import type { BoardState } from '../../lib/board';
import { boardSettings } from '../../lib/board/board-options';
import { LockBoard } from '../../lib/board/lock-board';
import { clusterSlot } from '../../lib/engine/redis/cluster-slot';
import { lockKeys } from '../../lib/engine/redis/keys';
import { deploymentCases } from '../support/deployments';
import { connect, quietLogger, singlePort, sleep, testPrefix } from '../support/engine';
import { AdminHeaderGuard, boardApp, stateWhen } from './board-support';

/**
 * The board on every deployment (single, master-slave, sentinel, cluster) and on Fastify; its SCAN
 * bounded per refresh and spread over every master of a Cluster.
 */
const REFRESH = 250;
const fresh = () => sleep(REFRESH + 10);

describe.each(deploymentCases())('lock board on $name', ({ name, connection }) => {
  const prefix = testPrefix();
  let locks: LockClient;
  let board: LockBoard;

  beforeAll(async () => {
    locks = await createLockClient({ connection, keyPrefix: prefix, logger: quietLogger, telemetry: false });
    board = new LockBoard(locks, boardSettings({ public: true, refreshMs: REFRESH }));
  });
  afterAll(async () => {
    board.close();
    await locks.close();
  });

  it('shows a lock of every kind with its holder, and forgets them once free', async () => {
    // Names in many slots: on a Cluster they land on every master.
    const names = Array.from({ length: 12 }, (_, i) => `job-${i}`);
    const handles = await Promise.all(names.map((n) => locks.getLock(n).lock({ leaseTime: 20_000 })));
    const simple = await locks.getSimpleLock('simple').tryLock({ leaseTime: 20_000 });
    const read = await locks.getReadWriteLock('catalog').readLock().lock({ leaseTime: 20_000 });
    const permit = await locks.getSemaphore('api', { permits: 2 }).acquire({ leaseTime: 20_000 });
    try {
      const all = [...names, 'simple', 'catalog', 'api'];
      const state = await stateWhen(
        () => board.state(),
        (seen) => all.every((n) => seen.locks.some((lock) => lock.name === n)),
      );
      expect(state.error).toBeUndefined();
      const byName = new Map(state.locks.map((l) => [l.name, l]));
      names.forEach((n, i) => expect(byName.get(n)?.holders[0].owner).toBe(handles[i].owner));
      expect(byName.get('simple')).toMatchObject({ kind: 'simple', holders: [{ owner: simple!.owner }] });
      expect(byName.get('catalog')).toMatchObject({
        kind: 'read-write',
        holders: [{ owner: read.owner, side: 'read' }],
      });
      expect(byName.get('api')).toMatchObject({ kind: 'semaphore', permits: { inUse: 1 } });
      if (name === 'cluster') {
        expect(state).toMatchObject({ cluster: true, masters: (locks.redis as Cluster).nodes('master').length });
        const masters = new Set(names.map((n) => masterOf(locks.redis as Cluster, lockKeys(prefix, n).lock)));
        expect(masters.size).toBeGreaterThan(1); // so finding them all means scanning every master
      }
    } finally {
      await Promise.all([...handles, simple!, read, permit].map((h) => h.release()));
    }
    await fresh();
    expect((await board.state()).locks).toEqual([]); // read and found free: gone at once
  });
});

/** The master serving `key`'s slot. */
function masterOf(cluster: Cluster, key: string): string {
  const slot = clusterSlot(key);
  const range = (cluster as unknown as { slots: string[][] }).slots[slot];
  return range[0];
}

describe('lock board, bounded work per refresh', () => {
  const prefix = testPrefix();
  let locks: LockClient;
  let filler: Redis;

  beforeAll(async () => {
    locks = await createLockClient({
      connection: deploymentCases()[0].connection,
      keyPrefix: prefix,
      logger: quietLogger,
      telemetry: false,
    });
    filler = connect();
    // 3000 keys the scan must walk past (another prefix; they expire on their own, soon, since
    // other files share this server).
    const pipeline = filler.pipeline();
    for (let i = 0; i < 3000; i++) pipeline.set(`${prefix}-filler:${i}`, '1', 'PX', 15_000);
    await pipeline.exec();
  });
  afterAll(async () => {
    await locks.close();
    const pipeline = filler.pipeline();
    for (let i = 0; i < 3000; i++) pipeline.del(`${prefix}-filler:${i}`);
    await pipeline.exec();
    filler.disconnect();
  });

  it('scans at most scanPerRefresh keys per refresh however many pages ask, and reads at most maxLocks locks', async () => {
    // Its own process, so the board learns of these locks from the scan only.
    const holder = await createLockClient({
      connection: deploymentCases()[0].connection,
      keyPrefix: prefix,
      logger: quietLogger,
      telemetry: false,
    });
    const board = new LockBoard(
      locks,
      boardSettings({ public: true, refreshMs: REFRESH, scanPerRefresh: 500, maxLocks: 3 }),
    );
    const scans = jest.spyOn(locks.redis as Redis, 'scan');
    const inspects = jest.spyOn(locks, 'inspect');
    const handles = await Promise.all(
      ['a', 'b', 'c', 'd', 'e'].map((n) => holder.getLock(n).lock({ leaseTime: 30_000 })),
    );
    try {
      let state: BoardState | undefined;
      let refreshes = 0;
      // Other files' keys share this server: a pass may take more refreshes than 3000 keys need.
      const enough = Math.ceil((await filler.dbsize()) / 500) * 2 + 5;
      for (; refreshes < enough && (state?.scanPasses ?? 0) < 1; refreshes++) {
        scans.mockClear();
        inspects.mockClear();
        // Ten pages at once share one read.
        const states = await Promise.all(Array.from({ length: 10 }, () => board.state()));
        state = states[0];
        expect(new Set(states).size).toBe(1);
        expect(scans.mock.calls.length).toBeLessThanOrEqual(2); // 500 keys, 250 per SCAN call
        for (const call of scans.mock.calls) expect(Number(call.at(-1))).toBeLessThanOrEqual(250);
        expect(inspects.mock.calls.length).toBeLessThanOrEqual(3);
        await fresh();
      }
      // 3000+ keys at 500 per refresh: a whole pass takes several refreshes, and then finds them all.
      expect(refreshes).toBeGreaterThanOrEqual(6);
      state = await board.state();
      expect(state.locks.map((l) => l.name)).toEqual(['a', 'b', 'c']);
      expect(state.namesKnown).toBe(5);
    } finally {
      await Promise.all(handles.map((h) => h.release()));
      board.close();
      await holder.close();
    }
  });
});

describe('lock board on Fastify', () => {
  const prefix = testPrefix();

  it('serves the page, the state and the force-unlock, behind its guard', async () => {
    const app = await boardApp(
      prefix,
      { route: '/locks', guard: AdminHeaderGuard, forceUnlock: true, refreshMs: REFRESH },
      { platform: 'fastify' },
    );
    try {
      expect((await request(app.url).get('/locks')).status).toBe(403);
      const page = await request(app.url).get('/locks').set('x-admin', 'yes');
      expect(page.status).toBe(200);
      expect(page.headers['content-type']).toMatch(/^text\/html/);
      expect(page.headers['content-security-policy']).toContain("script-src 'self'");
      expect(page.text).toContain('<script src="/locks/board.js" defer></script>');
      const script = await request(app.url).get('/locks/board.js').set('x-admin', 'yes');
      expect(script.headers['content-type']).toMatch(/^text\/javascript/);
      const handle = await app.locks.getLock('<b>fastify</b>').lock({ leaseTime: 20_000 });
      const read = async () => (await request(app.url).get('/locks/state').set('x-admin', 'yes')).body as BoardState;
      const state = await stateWhen(read, (seen) => seen.locks.length > 0);
      expect(state.locks).toMatchObject([
        { name: '<b>fastify</b>', holders: [{ owner: handle.owner }], canForceUnlock: true },
      ]);
      const refused = await request(app.url)
        .post('/locks/force-unlock')
        .set('x-admin', 'yes')
        .send({ name: '<b>fastify</b>', kind: 'reentrant', holder: handle.owner });
      expect(refused.status).toBe(403); // no action header
      const answer = await request(app.url)
        .post('/locks/force-unlock')
        .set('x-admin', 'yes')
        .set('x-lock-board', '1')
        .send({ name: '<b>fastify</b>', kind: 'reentrant', holder: handle.owner });
      expect(answer.status).toBe(200);
      expect(answer.body).toEqual({ unlocked: true, holders: [handle.owner] });
      expect((await app.locks.inspect('<b>fastify</b>')).state).toBe('free');
    } finally {
      await app.close();
    }
  });
});

describe('lock board, key names', () => {
  it('finds locks under an ioredis keyPrefix and a lock prefix with glob characters, and nothing of a look-alike prefix', async () => {
    const prefix = `${testPrefix()}*[x]?`;
    const redis = new IORedis({ host: '127.0.0.1', port: singlePort(), keyPrefix: 'app:' });
    const locks = new LockClient({ redis, keyPrefix: prefix, logger: quietLogger, telemetry: false });
    const lookAlike = new LockClient({ redis, keyPrefix: `${prefix}x`, logger: quietLogger, telemetry: false });
    const board = new LockBoard(locks, boardSettings({ public: true, refreshMs: REFRESH }));
    const mine = await locks.getLock('a}b{c%').lock({ leaseTime: 20_000 });
    const theirs = await lookAlike.getLock('other').lock({ leaseTime: 20_000 });
    try {
      const state = await stateWhen(
        () => board.state(),
        (seen) => seen.locks.length > 0,
      );
      expect(state.locks.map((l) => [l.name, l.holders[0].owner])).toEqual([['a}b{c%', mine.owner]]);
    } finally {
      await Promise.all([mine.release(), theirs.release()]);
      board.close();
      await Promise.all([locks.close(), lookAlike.close()]);
      redis.disconnect();
    }
  });
});
