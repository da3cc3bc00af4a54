import { Body, Controller, Injectable, Post, type INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import type Redis from 'ioredis';
import request from 'supertest';
import {
  CurrentLock,
  DistributedLock,
  LockOptionsError,
  LockQuorumError,
  LockService,
  RedisLockModule,
  RedisUnavailableError,
  type ActiveLock,
  type ConnectionOptions,
  type RedisLockModuleOptions,
} from '../../lib';
import { compileLockSpec } from '../../lib/internal';
import { portShift, startTopology, stopTopology, type RunningTopology } from '../../scripts/redis-topology';
import { connect, eventually, sleep, testPrefix } from '../support/engine';
import { sharedTopology } from '../support/topologies';
import { connectionsNamed, lockKey, lockOptions } from './nest-support';
import { PRIVATE_PORTS } from '../../scripts/test-ports';

/** A RedLock master started mid-test (private port; see scripts/redis-topology.ts). */
const LATE_BASE_PORT = PRIVATE_PORTS.lateRedLock.base;
/** Where it listens: moved by REDIS_TOPOLOGY_PORT_SHIFT, as every topology is. */
const LATE_PORT = LATE_BASE_PORT + portShift();

/** Accounts whose balance is held in memory: a transfer that overlaps another on an account is counted. */
const accounts = { busy: new Set<string>(), overlaps: 0, transfers: 0 };

async function exclusiveTransfer(from: string, to: string): Promise<void> {
  for (const a of [from, to]) if (accounts.busy.has(a)) accounts.overlaps++;
  accounts.busy.add(from).add(to);
  await sleep(Math.random() * 3);
  accounts.busy.delete(from);
  accounts.busy.delete(to);
  accounts.transfers++;
}

@Controller('transfers')
class TransfersController {
  @Post()
  @DistributedLock({ key: ['account:{body.from}', 'account:{body.to}'] })
  async transfer(@Body() body: { from: string; to: string }, @CurrentLock() lock: ActiveLock) {
    await exclusiveTransfer(body.from, body.to);
    return { names: lock.names, tokens: lock.fencingTokens };
  }
}

@Injectable()
class Ledger {
  @DistributedLock({ key: (from: string, to: string) => [`ledger:${from}`, `ledger:${to}`], kind: 'simple' })
  async move(_from: string, _to: string, inside: (lock: ActiveLock | undefined) => void): Promise<void> {
    inside(this.locks.current());
  }

  @DistributedLock({ key: 'payout:{0}', kind: 'redlock', leaseTime: 5_000 })
  async payout(_id: string, inside: (lock: ActiveLock | undefined) => Promise<void>): Promise<void> {
    await inside(this.locks.current());
  }

  constructor(private readonly locks: LockService) {}
}

const masterConnections = (name: string): ConnectionOptions[] =>
  sharedTopology('multi').masters.map((m) => ({ type: 'single', ...m, redisOptions: { connectionName: name } }));

async function start(options: RedisLockModuleOptions): Promise<INestApplication> {
  const moduleRef = await Test.createTestingModule({
    imports: [RedisLockModule.forRoot(options)],
    controllers: [TransfersController],
    providers: [Ledger],
  }).compile();
  const app = moduleRef.createNestApplication({ logger: false });
  await app.init();
  return app;
}

describe('@DistributedLock over several keys', () => {
  const prefix = testPrefix();
  let app: INestApplication;
  let redis: Redis;

  beforeAll(async () => {
    app = await start(lockOptions(prefix));
    redis = connect();
  });
  afterAll(async () => {
    await app?.close();
    await redis?.quit();
  });

  it('transfers A->B and B->A at once: all complete, none overlaps on an account', async () => {
    const pairs = [
      ['a', 'b'],
      ['b', 'a'],
      ['b', 'c'],
      ['c', 'a'],
    ];
    const responses = await Promise.all(
      Array.from({ length: 60 }, (_, i) => {
        const [from, to] = pairs[i % pairs.length];
        return request(app.getHttpServer()).post('/transfers').send({ from, to }).expect(201);
      }),
    );
    expect(accounts.overlaps).toBe(0);
    expect(accounts.transfers).toBe(60);
    const first = responses[1].body as { names: string[]; tokens: number[] };
    expect(first.names).toEqual(['account:b', 'account:a']); // the order given, whatever the order taken
    expect(first.tokens).toHaveLength(2);
    expect(first.tokens.every((t) => typeof t === 'number' && t > 0)).toBe(true);
    expect(await redis.exists(lockKey(prefix, 'account:a'), lockKey(prefix, 'account:b'))).toBe(0);
  });

  it('a transfer to the same account locks its name once (a simple lock would otherwise wait on itself)', async () => {
    const ledger = app.get(Ledger);
    let seen: ActiveLock | undefined;
    await ledger.move('x', 'x', (lock) => (seen = lock));
    expect(seen?.names).toEqual(['ledger:x']);
    await ledger.move('x', 'y', (lock) => (seen = lock));
    expect(seen?.names).toEqual(['ledger:x', 'ledger:y']);
    expect(seen?.kind).toBe('simple');
  });

  it('refuses an empty key list, a list with a non-string, and a RedLock over several keys', () => {
    expect(() => compileLockSpec({ key: [] }, 'A.b')).toThrow(LockOptionsError);
    expect(() => compileLockSpec({ key: ['a', 7] }, 'A.b')).toThrow(LockOptionsError);
    expect(() => compileLockSpec({ key: ['a', 'b'], kind: 'redlock' }, 'A.b')).toThrow(/redlock' locks one name/);
    expect(compileLockSpec({ key: ['a:{0}', 'b:{1}'] }, 'A.b').label).toBe('a:{0}+b:{1}');
  });

  it("kind 'redlock' without redLock.masters in the module: a LockOptionsError naming the option", async () => {
    await expect(app.get(Ledger).payout('p0', async () => undefined)).rejects.toThrow(/redLock\.masters/);
  });
});

describe("@DistributedLock kind 'redlock' over the module's masters", () => {
  const prefix = testPrefix();
  const connectionName = `redlock-${prefix.slice(-6)}`;
  let app: INestApplication;
  let masters: Redis[];

  beforeAll(async () => {
    app = await start(lockOptions(prefix, { redLock: { masters: masterConnections(connectionName) } }));
    masters = sharedTopology('multi').masters.map((m) => connect(m.port));
  });
  afterAll(async () => {
    await app?.close();
    await Promise.all(masters.map((m) => m.quit()));
  });

  it('holds the lock on a majority of masters while the method runs; calls exclude each other', async () => {
    const ledger = app.get(Ledger);
    let inside = 0;
    let overlaps = 0;
    let heldOn = 0;
    await Promise.all(
      Array.from({ length: 8 }, () =>
        ledger.payout('p1', async (lock) => {
          if (++inside > 1) overlaps++;
          expect(lock?.kind).toBe('redlock');
          expect(lock?.fencingTokens).toHaveLength(5);
          const present = await Promise.all(masters.map((m) => m.exists(lockKey(prefix, 'payout:p1'))));
          heldOn = Math.min(
            heldOn || 5,
            present.reduce((a, b) => a + b, 0),
          );
          await sleep(5);
          inside--;
        }),
      ),
    );
    expect(overlaps).toBe(0);
    expect(heldOn).toBeGreaterThanOrEqual(3);
    const left = await Promise.all(masters.map((m) => m.exists(lockKey(prefix, 'payout:p1'))));
    expect(left.every((n) => n === 0)).toBe(true);
  });

  it('LockService.redLock(name) uses the same masters', async () => {
    const handle = await app.get(LockService).redLock('payout:p2').lock({ leaseTime: 5_000 });
    const present = await Promise.all(masters.map((m) => m.exists(lockKey(prefix, 'payout:p2'))));
    expect(present.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(3);
    await handle.release();
  });

  it("LockService.redLock(name) keeps restarted masters out by the module's redLock.restartQuarantine", async () => {
    // A quarantine longer than these masters have been up: none may vote, and nothing is written.
    const options = { masters: masterConnections(`${connectionName}-q`), restartQuarantine: 365 * 86_400_000 };
    const guarded = await start(lockOptions(prefix, { redLock: options }));
    try {
      const error = await guarded
        .get(LockService)
        .redLock('payout:p3')
        .lock({ leaseTime: 5_000, waitTime: 200 })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(LockQuorumError);
      expect((error as LockQuorumError).keptOut).toBe(masters.length);
      const present = await Promise.all(masters.map((m) => m.exists(lockKey(prefix, 'payout:p3'))));
      expect(present.every((n) => n === 0)).toBe(true);
    } finally {
      await guarded.close();
    }
  });

  it('closes the masters’ connections on shutdown', async () => {
    const other = await start(lockOptions(prefix, { redLock: { masters: masterConnections(`${connectionName}-x`) } }));
    expect(await connectionsNamed(masters[0], `${connectionName}-x`)).toBeGreaterThan(0);
    await other.close();
    expect(await connectionsNamed(masters[0], `${connectionName}-x`)).toBe(0);
  });
});

describe('RedLock masters at start-up', () => {
  const prefix = testPrefix();
  // Nothing listens on these (private range; see scripts/redis-topology.ts), until LATE_PORT is started.
  const dead = (port: number): ConnectionOptions => ({ type: 'single', host: '127.0.0.1', port });

  it('starts with a majority reachable; a master that comes up later takes part from then on', async () => {
    const [m1, m2] = masterConnections(`redlock-min-${prefix.slice(-6)}`);
    const app = await start(lockOptions(prefix, { redLock: { masters: [m1, m2, dead(LATE_PORT)] } }));
    const ledger = app.get(Ledger);
    let late: RunningTopology | undefined;
    let probe: Redis | undefined;
    try {
      await ledger.payout('p3', async (lock) => {
        expect(lock?.fencingTokens.filter((t) => t !== null)).toHaveLength(2);
      });
      late = await startTopology('single', { basePort: LATE_BASE_PORT, name: 'redlock-late' });
      probe = connect(LATE_PORT);
      let onLate = 0;
      await eventually(
        async () => {
          await ledger.payout('p4', async () => void (onLate = await probe!.exists(lockKey(prefix, 'payout:p4'))));
          return onLate === 1;
        },
        15_000,
        200,
      );
    } finally {
      await app.close();
      await probe?.quit();
      if (late) await stopTopology(late);
    }
  }, 60_000);

  it('refuses to start without a majority, naming the masters it could not reach, and leaves no connection open', async () => {
    const name = `redlock-fail-${prefix.slice(-6)}`;
    const [m1, m2] = masterConnections(name);
    const main = connect();
    try {
      await expect(
        start(lockOptions(prefix, { redLock: { masters: [m1, m2, dead(7397), dead(7398), dead(7399)] } })),
      ).rejects.toThrow(RedisUnavailableError);
      await expect(start(lockOptions(prefix, { redLock: { masters: [m1, dead(7398), dead(7399)] } }))).rejects.toThrow(
        /127\.0\.0\.1:7398, 127\.0\.0\.1:7399/,
      );
      const probe = connect(sharedTopology('multi').masters[0].port);
      expect(await connectionsNamed(probe, name)).toBe(0);
      await probe.quit();
    } finally {
      await main.quit();
    }
  }, 60_000);

  it('refuses bad redLock options before connecting', async () => {
    await expect(start(lockOptions(prefix, { redLock: { masters: [] } }))).rejects.toThrow(/redLock\.masters/);
    await expect(start(lockOptions(prefix, { redLock: { masters: [{ type: 'single', port: -1 }] } }))).rejects.toThrow(
      /redLock\.masters\[0\]/,
    );
    await expect(
      start(lockOptions(prefix, { redLock: { masters: masterConnections('x'), driftFactor: 2 } })),
    ).rejects.toThrow(/driftFactor/);
    await expect(
      start(lockOptions(prefix, { redLock: { masters: masterConnections('x'), restartQuarantine: -1 } })),
    ).rejects.toThrow(/redLock\.restartQuarantine/);
  });
});
