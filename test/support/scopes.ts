import { runInLockScope } from '../../lib';

/** An owner scope that a test can enter again and again, between steps of other scopes. */
export interface ScopeRunner {
  /** Runs `fn` inside this scope (its locks' owner is the scope's). */
  run<T>(fn: () => Promise<T>): Promise<T>;
  close(): void;
}

/** A fresh owner scope (see runInLockScope), kept open until `close()`. */
export function openScope(): ScopeRunner {
  const tasks: (() => void)[] = [];
  let wake: (() => void) | undefined;
  let closed = false;
  void runInLockScope(
    async () => {
      while (!closed) {
        const task = tasks.shift();
        if (task)
          task(); // started here, so it runs in this scope
        else await new Promise<void>((resolve) => (wake = resolve));
      }
    },
    { newScope: true },
  );
  return {
    run<T>(fn: () => Promise<T>): Promise<T> {
      return new Promise<T>((resolve, reject) => {
        tasks.push(() => void fn().then(resolve, reject));
        wake?.();
      });
    },
    close() {
      closed = true;
      wake?.();
    },
  };
}
