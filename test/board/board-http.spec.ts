import request from 'supertest';
import { LockClient, LockOptionsError } from '../../lib';
import { LockBoardOptionsError, RedisLockBoardModule, type BoardState } from '../../lib/board';
import { lockClient, singlePort, testPrefix, type TestClient } from '../support/engine';
import { asyncBoardSettings } from '../../lib/board/board-options';
import { AdminHeaderGuard, boardApp, stateWhen, type BoardApp } from './board-support';

/** The board's HTTP surface on Express: who may see it, what it serves, and the force-unlock. */
describe('lock board over HTTP (Express)', () => {
  const prefix = testPrefix();
  let other: TestClient;

  beforeAll(() => {
    other = lockClient({ keyPrefix: prefix });
  });
  afterAll(() => other.close());

  it('refuses to start without a guard or public: true, with a typed error before any connection', () => {
    const attempt = () => RedisLockBoardModule.forRoot({ route: '/locks' });
    expect(attempt).toThrow(LockBoardOptionsError);
    expect(attempt).toThrow(/pass a guard .* or say it is meant to be open/);
    expect(attempt).toThrow(LockOptionsError);
    expect(() => RedisLockBoardModule.forRoot({ public: 'yes' as never })).toThrow(/public must be true or false/);
    expect(() => RedisLockBoardModule.forRoot({ public: true, route: '/a b' })).toThrow(/route must be a path/);
    expect(() => RedisLockBoardModule.forRoot({ public: true, refreshMs: 10 })).toThrow(
      /refreshMs must be a whole number in 250..60000/,
    );
    expect(() => RedisLockBoardModule.forRoot({ guard: {} as never })).toThrow(/guard must be a CanActivate/);
    expect(() => RedisLockBoardModule.forRoot({ public: true, forceUnlok: true } as never)).toThrow(
      /unknown option forceUnlok/,
    );
    try {
      attempt();
    } catch (error) {
      expect((error as Error).name).toBe('LockBoardOptionsError');
    }
  });

  it('forRootAsync: options from a factory with its injections; route and guard or public fixed at import', async () => {
    expect(() => RedisLockBoardModule.forRootAsync({ useFactory: () => ({}) })).toThrow(LockBoardOptionsError);
    const board = await boardApp(
      prefix,
      RedisLockBoardModule.forRootAsync({
        route: 'async-locks',
        public: true,
        inject: [LockClient],
        useFactory: (locks: LockClient) => ({
          forceUnlock: true,
          refreshMs: 250,
          title: `Locks of ${locks.keyPrefix}`,
        }),
      }),
    );
    try {
      expect((await request(board.url).get('/async-locks')).text).toContain(`<title>Locks of ${prefix}</title>`);
      expect((await request(board.url).get('/async-locks/state')).body).toMatchObject({
        forceUnlock: true,
        refreshMs: 250,
      });
    } finally {
      await board.close();
    }
    // What the factory returns is checked at start-up, like forRoot's options.
    const fixed = { public: true, useFactory: () => ({}) };
    expect(() => asyncBoardSettings(fixed, { route: 'x' })).toThrow(/route must be given to forRootAsync itself/);
    expect(() => asyncBoardSettings(fixed, { maxLocks: 0 })).toThrow(LockBoardOptionsError);
  });

  describe('behind a guard, read-only', () => {
    let board: BoardApp;
    beforeAll(async () => {
      board = await boardApp(prefix, {
        route: '/locks',
        guard: AdminHeaderGuard,
        refreshMs: 250,
        title: 'Locks <b>&</b> "co"',
      });
    });
    afterAll(() => board.close());

    it('serves nothing to a request the guard refuses: page, script, state, action', async () => {
      for (const path of ['/locks', '/locks/board.js', '/locks/board.css', '/locks/state']) {
        expect((await request(board.url).get(path)).status).toBe(403);
      }
      expect((await request(board.url).post('/locks/force-unlock').set('x-lock-board', '1').send({})).status).toBe(403);
    });

    it('serves the page with every value escaped, its own script and stylesheet, and strict headers', async () => {
      const page = await request(board.url).get('/locks').set('x-admin', 'yes');
      expect(page.status).toBe(200);
      expect(page.headers['content-type']).toMatch(/^text\/html/);
      expect(page.text).toContain('<title>Locks &#60;b&#62;&#38;&#60;/b&#62; &#34;co&#34;</title>');
      expect(page.text).not.toContain('<b>');
      expect(page.text).toContain('<script src="/locks/board.js" defer></script>');
      expect(page.text).not.toMatch(/<script>|<script [^s]/); // no inline script, so the CSP can forbid it
      expect(page.headers['content-security-policy']).toContain("script-src 'self'");
      expect(page.headers['content-security-policy']).toContain("frame-ancestors 'none'");
      expect(page.headers['x-content-type-options']).toBe('nosniff');
      expect(page.headers['cache-control']).toBe('no-store');
      const script = await request(board.url).get('/locks/board.js').set('x-admin', 'yes');
      expect(script.headers['content-type']).toMatch(/^text\/javascript/);
      expect(script.text).toContain('textContent');
      expect(script.text).not.toContain('innerHTML');
      expect((await request(board.url).get('/locks/board.css').set('x-admin', 'yes')).headers['content-type']).toMatch(
        /^text\/css/,
      );
    });

    it('shows a held lock with its holder, lease and token; a hostile name is data, never markup', async () => {
      const hostile = '<script>alert("x")</script>&{}%';
      const handle = await other.locks.getLock(hostile).lock({ leaseTime: 20_000 });
      try {
        const state = await stateOf(board, '/locks', [hostile]);
        const lock = state.locks.find((l) => l.name === hostile);
        expect(lock).toMatchObject({
          kind: 'reentrant',
          state: 'held',
          fencingToken: handle.fencingToken,
          canForceUnlock: false,
        });
        expect(lock!.holders).toEqual([{ owner: handle.owner, count: 1, remainingLeaseMs: expect.any(Number) }]);
        expect(lock!.remainingLeaseMs).toBeGreaterThan(15_000);
        expect(state.forceUnlock).toBe(false);
        // The page itself never carries a lock name: board.js renders the state as text.
        expect((await request(board.url).get('/locks').set('x-admin', 'yes')).text).not.toContain('alert');
      } finally {
        await handle.release();
      }
    });

    it('refuses a force-unlock while read-only, and the lock stays held', async () => {
      const handle = await other.locks.getLock('kept').lock({ leaseTime: 20_000 });
      try {
        const answer = await request(board.url)
          .post('/locks/force-unlock')
          .set('x-admin', 'yes')
          .set('x-lock-board', '1')
          .send({ name: 'kept', kind: 'reentrant', holder: handle.owner });
        expect(answer.status).toBe(403);
        expect(answer.body.message).toMatch(/read-only/);
        expect((await other.locks.inspect('kept')).state).toBe('held');
      } finally {
        await handle.release();
      }
    });

    it("lists this process's events with their reasons: a lease that ran out under its holder, and its late release", async () => {
      const handle = await board.locks.getLock('short-lease').lock({ leaseTime: 200, label: 'short:{id}' });
      await new Promise((resolve) => setTimeout(resolve, 400));
      expect(await handle.release()).toBe('expired');
      const state = await stateOf(board);
      const events = state.events.filter((e) => e.name === 'short-lease');
      expect(events.map((e) => [e.type, e.reason])).toEqual([
        ['expired', 'its lease had run out before the release'],
        ['expired', 'lease-expired'],
        ['acquired', undefined],
      ]);
      expect(events[2]).toMatchObject({ kind: 'reentrant', owner: handle.owner, label: 'short:{id}' });
      expect(state.labels.find((row) => row.label === 'short:{id}')).toMatchObject({ acquisitions: 1 });
    });

    it('never puts an address, a password or a connection string in what it serves', async () => {
      const state = await request(board.url).get('/locks/state').set('x-admin', 'yes');
      const port = String(singlePort());
      expect(state.text).not.toContain(`:${port}`);
      expect(state.text).not.toContain('127.0.0.1');
      expect(state.text).not.toMatch(/redis:\/\/|password/i);
    });
  });

  describe('public, with force-unlock', () => {
    let board: BoardApp;
    beforeAll(async () => {
      board = await boardApp(prefix, { route: 'ops/locks', public: true, forceUnlock: true, refreshMs: 250 });
    });
    afterAll(() => board.close());

    const forceUnlock = (body: object, marker = '1') =>
      request(board.url).post('/ops/locks/force-unlock').set('x-lock-board', marker).send(body);

    it('force-unlocks the holder the confirmation named, and records it', async () => {
      const handle = await other.locks.getLock('stuck').lock({ leaseTime: 20_000 });
      expect(
        (await stateOf(board, '/ops/locks', ['stuck'])).locks.find((l) => l.name === 'stuck')?.canForceUnlock,
      ).toBe(true);
      expect((await forceUnlock({ name: 'stuck', kind: 'reentrant', holder: handle.owner }, '0')).status).toBe(403);
      expect((await forceUnlock({ name: 'stuck', kind: 'reentrant', holder: 'someone:else' })).status).toBe(409);
      expect((await forceUnlock({ name: '', kind: 'reentrant', holder: 'x' })).status).toBe(400);
      expect((await forceUnlock({ name: 'stuck', kind: 'nope', holder: 'x' })).status).toBe(400);
      expect((await other.locks.inspect('stuck')).state).toBe('held');
      const answer = await forceUnlock({ name: 'stuck', kind: 'reentrant', holder: handle.owner });
      expect(answer.status).toBe(200);
      expect(answer.body).toEqual({ unlocked: true, holders: [handle.owner] });
      expect((await other.locks.inspect('stuck')).state).toBe('free');
      const state = await stateOf(board, '/ops/locks');
      expect(state.locks.find((l) => l.name === 'stuck')).toBeUndefined();
      expect(state.events[0]).toMatchObject({
        type: 'forced',
        name: 'stuck',
        reason: expect.stringContaining(handle.owner),
      });
      expect((await forceUnlock({ name: 'stuck', kind: 'reentrant', holder: handle.owner })).status).toBe(409);
    });

    it('force-unlocks a simple lock and both sides of a read-write lock; a semaphore has none', async () => {
      const simple = await other.locks.getSimpleLock('simple-one').tryLock({ leaseTime: 20_000 });
      const rw = other.locks.getReadWriteLock('rw-one');
      const write = await rw.writeLock().lock({ leaseTime: 20_000 });
      const permits = await other.locks
        .getSemaphore('sem-one', { permits: 3 })
        .acquire({ permits: 2, leaseTime: 20_000 });
      try {
        const state = await stateOf(board, '/ops/locks', ['simple-one', 'rw-one', 'sem-one']);
        const byName = new Map(state.locks.map((l) => [l.name, l]));
        expect(byName.get('simple-one')).toMatchObject({ kind: 'simple', canForceUnlock: true });
        expect(byName.get('rw-one')).toMatchObject({
          kind: 'read-write',
          holders: [{ owner: write.owner, side: 'write', count: 1 }],
        });
        expect(byName.get('sem-one')).toMatchObject({
          kind: 'semaphore',
          canForceUnlock: false,
          permits: { inUse: 2, storedLimit: null },
        });
        expect(byName.get('sem-one')!.holders[0]).toMatchObject({ count: 2, owner: permits.owner });
        expect((await forceUnlock({ name: 'simple-one', kind: 'simple', holder: simple!.owner })).body.unlocked).toBe(
          true,
        );
        expect((await forceUnlock({ name: 'rw-one', kind: 'read-write', holder: write.owner })).body.unlocked).toBe(
          true,
        );
        expect(
          (await forceUnlock({ name: 'sem-one', kind: 'semaphore', holder: byName.get('sem-one')!.holders[0].owner }))
            .status,
        ).toBe(409);
        expect(await other.locks.getSimpleLock('simple-one').isLocked()).toBe(false);
        expect(await rw.writeLock().isLocked()).toBe(false);
      } finally {
        await permits.release();
      }
    });
  });
});

/** The board's state, read after a refresh, once it shows every lock of `names`. */
async function stateOf(board: BoardApp, route = '/locks', names: string[] = []): Promise<BoardState> {
  // The state is read at most once per refreshMs (250 here): wait that long so this read is fresh.
  await new Promise((resolve) => setTimeout(resolve, 260));
  const read = async () => {
    const answer = await request(board.url).get(`${route}/state`).set('x-admin', 'yes');
    expect(answer.status).toBe(200);
    return answer.body as BoardState;
  };
  return stateWhen(read, (state) => names.every((name) => state.locks.some((lock) => lock.name === name)));
}
