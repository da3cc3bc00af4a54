/**
 * v2's lock: a promise-chain mutex. It serialises requests inside one process only; the other app
 * instance behind the load balancer does not see it, which is exactly what v2 demonstrates.
 */
export class InProcessMutex {
  private tail: Promise<unknown> = Promise.resolve();

  run<T>(fn: () => Promise<T>): Promise<T> {
    const result = this.tail.then(fn, fn);
    this.tail = result.catch(() => undefined);
    return result;
  }
}
