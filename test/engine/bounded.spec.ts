import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { bounded } from '../../lib/engine/redis/bounded';
import { RedisUnavailableError } from '../../lib';

// A full collection on demand: whether a settled operation's result can still be reached is the point.
setFlagsFromString('--expose-gc');
const collectGarbage = runInNewContext('gc') as () => void;

const describeOp = { key: 'bounded-test', name: 'test' };

/** Runs one operation to its end through bounded; its result is then referenced only through `results`. */
async function settleOne(results: WeakRef<object>[], i: number): Promise<void> {
  const result = { i };
  results.push(new WeakRef(result));
  await bounded(Promise.resolve(result), 60_000, describeOp);
}

/** How many of `refs` a full collection leaves alive (after the job that made them has ended). */
async function survivors(refs: WeakRef<object>[]): Promise<number> {
  await new Promise((resolve) => setImmediate(resolve));
  collectGarbage();
  return refs.filter((ref) => ref.deref() !== undefined).length;
}

describe('bounded', () => {
  it('keeps nothing of an operation once it settled, so a lock taken in a loop leaves no garbage to promote', async () => {
    const results: WeakRef<object>[] = [];
    for (let i = 0; i < 100; i++) await settleOne(results, i);
    expect(await survivors(results)).toBe(0);
  });

  it('keeps nothing of the settled operations queued behind one still pending', async () => {
    let settleSlow!: (value: string) => void;
    const slow = bounded(new Promise<string>((resolve) => (settleSlow = resolve)), 60_000, describeOp);
    const results: WeakRef<object>[] = [];
    for (let i = 0; i < 100; i++) await settleOne(results, i);
    expect(await survivors(results)).toBe(0);
    settleSlow('done');
    await expect(slow).resolves.toBe('done');
  });

  it('still rejects an operation that outlives its deadline after the queue emptied and started over', async () => {
    await bounded(Promise.resolve(1), 200, describeOp);
    await bounded(Promise.resolve(2), 200, describeOp);
    const startedAt = Date.now();
    const hanging = bounded(new Promise<never>(() => undefined), 200, describeOp);
    await expect(hanging).rejects.toBeInstanceOf(RedisUnavailableError);
    const tookMs = Date.now() - startedAt;
    expect(tookMs).toBeGreaterThanOrEqual(150);
    expect(tookMs).toBeLessThan(5_000);
  });

  it('reports a late success to onLateResult after the deadline rejected the caller', async () => {
    let settle!: (value: string) => void;
    const late: string[] = [];
    const operation = new Promise<string>((resolve) => (settle = resolve));
    await expect(bounded(operation, 50, describeOp, (value) => late.push(value))).rejects.toBeInstanceOf(
      RedisUnavailableError,
    );
    settle('granted late');
    await operation;
    await new Promise((resolve) => setImmediate(resolve));
    expect(late).toEqual(['granted late']);
  });
});
