import { AsyncLocalStorage } from 'node:async_hooks';
import { promiseHooks } from 'node:v8';

/**
 * The promises a locked call's work has started and that have not settled yet: what still runs after
 * its caller went away, or after its result ended (`from(this.step()).pipe(timeout(1_000))`,
 * `Promise.race([this.step(), sleep(1_000)])`). Unsubscribing an Observable cancels its timers and
 * subscriptions, but not a promise it waits for (`from(this.work())`, `switchMap(() => this.step())`),
 * so the lock is kept until those settle. A promise counts when it is created inside the work's async
 * call chain (V8's promise hooks, installed only while some call is tracked: they cost every promise of
 * the process a function call meanwhile).
 */
export class PendingWork {
  private readonly pending = new Set<Promise<unknown>>();
  private tracking = true;
  private onIdle?: () => void;

  /** Runs `fn` (the subscription to the work) so that promises it creates, now or later, are counted. */
  run<T>(fn: () => T): T {
    return current.run(this, fn);
  }

  /** Promises created from now on no longer count (the lock is being released). */
  stop(): void {
    if (!this.tracking) return;
    this.tracking = false;
    this.pending.clear();
    untrack();
  }

  /** Resolves once every promise the work started has settled (at once if none is pending). */
  settled(): Promise<void> {
    if (this.pending.size === 0) return Promise.resolve();
    return new Promise<void>((resolve) => (this.onIdle = resolve));
  }

  /**
   * Whether a promise of the work still runs once the callbacks queued so far have run: the promise of
   * a `then` callback that ended the work (`from(promise)` completing) settles a moment after it.
   */
  async outlivesResult(): Promise<boolean> {
    if (this.pending.size === 0) return false;
    let turn!: NodeJS.Immediate;
    await Promise.race([this.settled(), new Promise((resolve) => (turn = setImmediate(resolve)))]);
    clearImmediate(turn);
    return this.pending.size > 0;
  }

  /** How many promises of the work are still pending. */
  get size(): number {
    return this.pending.size;
  }

  /** @internal From the promise hooks. */
  created(promise: Promise<unknown>): void {
    if (!this.tracking) return;
    this.pending.add(promise);
    owners.set(promise, this);
  }

  /** @internal From the promise hooks. */
  done(promise: Promise<unknown>): void {
    if (!this.pending.delete(promise) || this.pending.size > 0) return;
    const idle = this.onIdle;
    this.onIdle = undefined;
    idle?.();
  }

  /** Starts counting: call once per PendingWork, before `run`; `stop()` ends it. */
  static start(): PendingWork {
    track();
    return new PendingWork();
  }
}

/** Runs `fn` outside any tracked work: the lock's own steps (its release) must not count as the work. */
export function outsideWork<T>(fn: () => T): T {
  return current.exit(fn);
}

// Process-wide by nature: the hooks see every promise, and the store tells whose work created it.
const current = new AsyncLocalStorage<PendingWork>();
const owners = new WeakMap<Promise<unknown>, PendingWork>();
let tracked = 0;
let stopHooks: (() => void) | undefined;

function track(): void {
  if (tracked++ > 0) return;
  const stopInit = promiseHooks.onInit((promise) => current.getStore()?.created(promise));
  const stopSettled = promiseHooks.onSettled((promise) => owners.get(promise)?.done(promise));
  stopHooks = () => {
    stopInit();
    stopSettled();
  };
}

function untrack(): void {
  if (--tracked > 0) return;
  stopHooks?.();
  stopHooks = undefined;
}
