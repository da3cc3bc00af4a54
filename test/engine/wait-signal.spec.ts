import { getEventListeners } from 'node:events';
import { onAbort, type CombinedSignal } from '../../lib/engine/waiting/abort-fan-out';
import { ClosingWaits } from '../../lib/engine/waiting/closing-waits';
import { LockError } from '../../lib';
import { lockClient, sleep, testPrefix, type TestClient } from '../support/engine';

/**
 * An acquisition given a signal stops when it aborts or when its client closes, without an
 * AbortController of its own (see ClosingWaits.signalFor): what it waits on, and what it leaves behind.
 */
describe('what a wait stops for: the caller signal and the client closing', () => {
  const prefix = testPrefix();

  describe('the combined signal', () => {
    const combined = (own: AbortController, waits: ClosingWaits) => waits.signalFor(own.signal) as CombinedSignal;

    it('without a caller signal it is the client closing signal itself: nothing is made per acquisition', () => {
      const waits = new ClosingWaits();
      expect(waits.signalFor(undefined)).toBe(waits.signal);
    });

    it("tells the caller's abort, with the caller's reason, once, and stops listening to both signals", () => {
      const own = new AbortController();
      const waits = new ClosingWaits();
      const signal = combined(own, waits);
      const calls: unknown[] = [];
      onAbort(signal, () => calls.push(signal.reason));
      expect(signal.aborted).toBe(false);
      expect(() => signal.throwIfAborted()).not.toThrow();
      const reason = new Error('caller gone');
      own.abort(reason);
      void waits.close(0); // the client closes after: no second call
      expect(calls).toEqual([reason]);
      expect(signal.aborted).toBe(true);
      expect(() => signal.throwIfAborted()).toThrow(reason);
    });

    it("tells the client's closing with its reason", () => {
      const own = new AbortController();
      const waits = new ClosingWaits();
      const signal = combined(own, waits);
      const calls: unknown[] = [];
      onAbort(signal, () => calls.push(signal.reason));
      void waits.close(0);
      expect(calls).toEqual([waits.signal.reason]);
      expect(calls[0]).toBeInstanceOf(LockError);
    });

    it('a wait that stopped listening is not called when either signal aborts later', () => {
      for (const abort of ['own', 'closing'] as const) {
        const own = new AbortController();
        const waits = new ClosingWaits();
        let called = 0;
        const stop = onAbort(combined(own, waits), () => called++);
        stop();
        if (abort === 'own') own.abort();
        else void waits.close(0);
        expect(called).toBe(0);
      }
    });
  });

  describe('on a lock', () => {
    let holder: TestClient;
    let waiter: TestClient;
    beforeAll(() => {
      holder = lockClient({ keyPrefix: prefix });
      waiter = lockClient({ keyPrefix: prefix });
    });
    afterAll(async () => {
      await holder.close();
      await waiter.close();
    });

    it("a waiter given a signal ends with the caller's reason when it aborts, and the lock is taken by the next", async () => {
      const name = `either-${Math.random().toString(36).slice(2)}`;
      const held = await holder.locks.getLock(name).lock();
      const own = new AbortController();
      const waiting = waiter.locks.getLock(name).lock({ signal: own.signal });
      await sleep(100);
      const reason = new Error('request cancelled');
      own.abort(reason);
      await expect(waiting).rejects.toBe(reason);
      await held.release();
      const next = await waiter.locks.getLock(name).lock({ waitTime: 5_000 });
      await next.release();
    });

    it('many waits, one after another, with one caller signal: one listener on it, and none added per wait', async () => {
      const name = `either-${Math.random().toString(36).slice(2)}`;
      const own = new AbortController();
      const lock = waiter.locks.getLock(name);
      for (let i = 0; i < 50; i++) {
        const held = await holder.locks.getLock(name).lock();
        const waiting = lock.lock({ signal: own.signal });
        await sleep(5);
        await held.release();
        await (await waiting).release();
      }
      expect(getEventListeners(own.signal, 'abort').length).toBeLessThanOrEqual(1);
    });

    it("a waiter given a signal ends when its client closes, told that the client is closed, the caller's signal untouched", async () => {
      const own = lockClient({ keyPrefix: prefix });
      const name = `either-${Math.random().toString(36).slice(2)}`;
      const held = await holder.locks.getLock(name).lock();
      const signal = new AbortController().signal;
      const waiting = own.locks.getLock(name).lock({ signal });
      waiting.catch(() => undefined);
      await sleep(100);
      await own.close();
      await expect(waiting).rejects.toThrow(`The lock client is closed: lock "${name}" is not acquired.`);
      expect(signal.aborted).toBe(false);
      await held.release();
    });
  });
});
