import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import type Redis from 'ioredis';
import { lockKeys, readWriteKeys } from '../../lib/internal';
import { permitKeys } from '../../lib/engine/kinds/permit-keys';
import * as catalog from '../../lib/engine/scripts/catalog';
import { ALL_SCRIPTS, RENEW_MANY } from '../../lib/engine/scripts/catalog';
import { LuaScript } from '../../lib/engine/scripts/lua-script';
import { loadedScript } from '../../lib/engine/scripts/loader';
import { REPLY_MEANINGS } from '../../lib/engine/scripts/replies';
import { connect, testPrefix } from '../support/engine';
import { DEFAULT_IDLE_KEY_TTL as IDLE_KEY_TTL } from '../../lib/engine/client/lock-client';
import { clockToken } from '../support/fencing';

const LUA_DIR = join(__dirname, '..', '..', 'lua');

/** The highest n of `<what>[n]` in a source, and whether every one of 1..n appears. */
function indexesUsed(source: string, what: 'KEYS' | 'ARGV'): { highest: number; gapless: boolean } {
  const used = new Set([...source.matchAll(new RegExp(`${what}\\[(\\d+)\\]`, 'g'))].map((m) => Number(m[1])));
  const highest = Math.max(0, ...used);
  return { highest, gapless: Array.from({ length: highest }, (_, i) => i + 1).every((n) => used.has(n)) };
}

/** The status words a source returns: `return 'w'`, `return {'w', …}`, `and 'w' or 'v'`. */
function replyWords(source: string): string[] {
  const patterns = [/return '([a-z-]+)'/g, /return \{'([a-z-]+)'/g, /and '([a-z-]+)' or '([a-z-]+)'/g];
  return patterns.flatMap((pattern) => [...source.matchAll(pattern)].flatMap((m) => m.slice(1)));
}

/**
 * Each script's declaration (lib/engine/scripts/catalog.ts) against its file, and each script run
 * once, on its own, on a real Redis: what the library sends and expects is what the file takes and
 * replies. The behaviour of each script is tested in scripts.spec.ts, semaphore-scripts.spec.ts and
 * the kinds' tests.
 */
describe('script contracts', () => {
  const declared = ALL_SCRIPTS as readonly LuaScript<string, unknown, unknown>[];

  it('every file in lua/ is declared once, and every declaration names a file there', () => {
    const files = readdirSync(LUA_DIR).filter((file) => file.endsWith('.lua'));
    const names = [...declared.map((script) => script.file), RENEW_MANY.file];
    expect([...names].sort()).toEqual([...files].sort());
    // Every declaration the catalog exports is one the contract covers.
    const exported = Object.values(catalog).filter((value) => value instanceof LuaScript);
    expect(exported.filter((script) => !declared.includes(script as never))).toEqual([]);
  });

  it.each(declared.map((script) => [script.file, script] as const))(
    '%s takes the keys and arguments it is declared with, and its header lists them',
    (_file, script) => {
      const { source } = loadedScript(script.file);
      const keys = indexesUsed(source, 'KEYS');
      const args = indexesUsed(source, 'ARGV');
      expect({ keys: keys.highest, args: args.highest }).toEqual({
        keys: script.keyNames.length,
        args: script.argNamesInOrder.length,
      });
      expect(keys.gapless && args.gapless).toBe(true);
      for (let i = 1; i <= script.keyNames.length; i++) expect(source).toMatch(new RegExp(`^-- KEYS\\[${i}\\] `, 'm'));
      for (let i = 1; i <= script.argNamesInOrder.length; i++) {
        expect(source).toMatch(new RegExp(`^-- ARGV\\[${i}\\] `, 'm'));
      }
    },
  );

  it('each script says on its first line how it meets a full Redis: refused whole if it takes a lock, run anyway if it frees one', () => {
    // Taking a lock needs memory: refused before it runs (nothing half-written). Reads need none.
    const takesMemory = new Set([
      'fair-lock-7.lua',
      'lock-5.lua',
      'rw-read-lock-6.lua',
      'rw-write-lock-7.lua',
      'semaphore-acquire-7.lua',
      'semaphore-set-permits-6.lua',
      'simple-lock-5.lua',
      'redlock-grant-3.lua',
    ]);
    const readsOnly = new Set([
      'hold-state-2.lua',
      'inspect-5.lua',
      'rw-read-hold-count-2.lua',
      'rw-read-pttl-1.lua',
      'rw-inspect-5.lua',
      'semaphore-state-2.lua',
      'semaphore-inspect-4.lua',
    ]);
    const files = readdirSync(LUA_DIR).filter((file) => file.endsWith('.lua'));
    const firstLines = Object.fromEntries(files.map((file) => [file, loadedScript(file).source.split('\n', 1)[0]]));
    const expected = Object.fromEntries(
      files.map((file) => [
        file,
        takesMemory.has(file) ? '#!lua' : readsOnly.has(file) ? '#!lua flags=no-writes' : '#!lua flags=allow-oom',
      ]),
    );
    expect(firstLines).toEqual(expected);
  });

  it('the scripts reply with the words of the table and nothing else, and every word is used', () => {
    const used = new Set(declared.flatMap((script) => replyWords(loadedScript(script.file).source)));
    expect([...used].sort()).toEqual(Object.keys(REPLY_MEANINGS).sort());
  });

  describe('each script run on its own', () => {
    let redis: Redis;
    const prefix = testPrefix();
    let n = 0;
    /** Fresh keys of every kind: each script picks the ones it is declared with. */
    const freshKeys = () => {
      const name = `contract-${++n}`;
      const lock = lockKeys(prefix, name);
      // The simple lock's record of recent releases (see simple-lock.ts) is not in lockKeys.
      return {
        ...readWriteKeys(prefix, name),
        ...permitKeys(prefix, name),
        ...lock,
        released: `${lock.lock}:releases`,
      };
    };
    const publish = 'publish' as const;

    beforeAll(() => (redis = connect()));
    afterAll(() => redis.quit());

    /** One call on fresh keys, and what it must reply there. */
    function call<K extends string, A, R>(script: LuaScript<K, A, R>, args: A, expected: unknown) {
      return [script.file, () => script.run(redis, freshKeys() as Record<K, string>, args), expected] as const;
    }
    const grant = ['granted', clockToken()];
    /** A grant of a lock that takes turns also says whether other processes wait. */
    const turnGrant = ['granted', clockToken(), 0];
    const calls = [
      call(
        catalog.LOCK,
        {
          idleKeyTtl: IDLE_KEY_TTL,
          leaseMs: 5000,
          owner: 'c:1',
          clientId: 'c',
          waiting: 'once',
          holdId: 'h1',
        },
        turnGrant,
      ),
      call(
        catalog.UNLOCK,
        {
          owner: 'c:1',
          holdId: 'h1',
          leaseMs: 5000,
          publish,
          message: 'm',
          handOver: 'pass',
          clientId: 'c',
          which: 'one',
          turnMs: 0,
        },
        'not-locked',
      ),
      call(catalog.CLAIM_ATTEMPT, { holdId: 'h1', owner: 'c:1', leaseMs: 5000, idleKeyTtl: IDLE_KEY_TTL }, [
        'cancelled',
      ]),
      call(catalog.PASS_WAKE, { clientId: 'c', publish, message: 'm' }, false),
      call(catalog.FORCE_UNLOCK, { publish, message: 'm', callId: 'f1' }, false),
      call(
        catalog.SIMPLE_LOCK,
        { idleKeyTtl: IDLE_KEY_TTL, token: 't', leaseMs: 5000, clientId: 'c', waiting: 'once' },
        turnGrant,
      ),
      call(
        catalog.SIMPLE_UNLOCK,
        { token: 't', owner: '', callId: '', publish, message: 'm', handOver: 'pass', clientId: 'c', turnMs: 0 },
        'not-locked',
      ),
      call(catalog.SIMPLE_CLAIM, { token: 't' }, ['cancelled']),
      call(
        catalog.REDLOCK_GRANT,
        { idleKeyTtl: IDLE_KEY_TTL, token: 't', leaseMs: 5000, clientId: 'c', waiting: 'once' },
        grant,
      ),
      call(catalog.REDLOCK_RELEASE, { token: 't', publish, message: 'm', clientId: 'c' }, 'not-locked'),
      call(
        catalog.FAIR_LOCK,
        {
          idleKeyTtl: IDLE_KEY_TTL,
          leaseMs: 5000,
          owner: 'c:1',
          staleWaiterTimeout: 5000,
          acceptanceLease: 1000,
          publish,
          holdId: 'h1',
          waiterId: 'c:w1',
          mode: 'once',
        },
        grant,
      ),
      call(
        catalog.FAIR_UNLOCK,
        {
          idleKeyTtl: IDLE_KEY_TTL,
          owner: 'c:1',
          holdId: 'h1',
          leaseMs: 5000,
          acceptanceLease: 1000,
          publish,
          which: 'one',
        },
        'not-locked',
      ),
      call(
        catalog.FAIR_FORCE_UNLOCK,
        { idleKeyTtl: IDLE_KEY_TTL, acceptanceLease: 1000, publish, callId: 'f1' },
        false,
      ),
      call(
        catalog.FAIR_ACCEPT,
        { idleKeyTtl: IDLE_KEY_TTL, leaseMs: 5000, owner: 'c:1', waiterId: 'c:w1', holdId: 'h1' },
        false,
      ),
      call(
        catalog.FAIR_ABANDON,
        { idleKeyTtl: IDLE_KEY_TTL, waiterId: 'c:w1', owner: 'c:1', holdId: '*', acceptanceLease: 1000, publish },
        false,
      ),
      call(catalog.READ_LOCK, { idleKeyTtl: IDLE_KEY_TTL, leaseMs: 5000, owner: 'c:1', holdId: 'h1' }, grant),
      call(catalog.READ_UNLOCK, { owner: 'c:1', holdId: 'h1', leaseMs: 5000, publish, which: 'one' }, 'not-locked'),
      call(catalog.READ_PTTL, {}, -2),
      call(catalog.READ_HOLD_COUNT, { owner: 'c:1' }, 0),
      call(
        catalog.WRITE_LOCK,
        { idleKeyTtl: IDLE_KEY_TTL, leaseMs: 5000, owner: 'c:1', intentMs: 0, holdId: 'h1', waitId: 'w1' },
        grant,
      ),
      call(catalog.WRITE_UNLOCK, { owner: 'c:1', holdId: 'h1', leaseMs: 5000, publish, which: 'one' }, 'not-locked'),
      call(catalog.READ_CLAIM_ATTEMPT, { holdId: 'h1', owner: 'c:1' }, ['cancelled']),
      call(catalog.WRITE_ABANDON, { owner: 'c:1', publish, waitId: 'w1' }, false),
      call(catalog.READ_WRITE_FORCE_UNLOCK, { side: 'write', publish, callId: 'f1' }, false),
      call(catalog.READ_WRITE_INSPECT, { most: 10 }, [-2, [], [], 0, [], 0, null]),
      call(
        catalog.SEMAPHORE_ACQUIRE,
        {
          idleKeyTtl: IDLE_KEY_TTL,
          member: '1:c:1',
          permits: 1,
          leaseMs: 5000,
          configuredLimit: 2,
          publish,
          clientId: 'c',
          mode: 'once',
          acceptanceLease: 1000,
          staleWaiterTimeout: 5000,
        },
        ['granted', clockToken(), 1],
      ),
      call(catalog.SEMAPHORE_CLAIM, { member: '1:c:1', leaseMs: 5000, clientId: 'c', idleKeyTtl: IDLE_KEY_TTL }, [
        'refused',
        -1,
      ]),
      call(
        catalog.SEMAPHORE_RELEASE,
        {
          member: '1:c:1',
          configuredLimit: 2,
          publish,
          memoryMs: 1000,
          acceptanceLease: 1000,
          idleKeyTtl: IDLE_KEY_TTL,
          leavingClient: '',
        },
        'not-locked',
      ),
      call(catalog.SEMAPHORE_SET_PERMITS, { idleKeyTtl: IDLE_KEY_TTL, permits: 3, publish, acceptanceLease: 1000 }, 3),
      call(catalog.SEMAPHORE_STATE, { configuredLimit: 2 }, [2, 0]),
      call(catalog.SEMAPHORE_INSPECT, { most: 10 }, [null, 0, [], 0, null, [], 0]),
      call(catalog.INSPECT, {}, ['none', -2, [], null, [], []]),
      call(catalog.HOLD_STATE, { holder: 'c:1', kind: 'hash' }, [-2, null, null]),
    ];

    it('covers every declared script', () => {
      expect(calls.map(([file]) => file)).toEqual(declared.map((script) => script.file));
    });

    it.each(calls)('%s', async (_file, run, expected) => {
      expect(await run()).toEqual(expected);
    });

    it('renew-many-n.lua', async () => {
      const { lock, fence } = freshKeys();
      expect(await RENEW_MANY.run(redis, [lock, fence], [IDLE_KEY_TTL, 'hash', 5000, 'c:1'])).toEqual([0]);
    });
  });
});
