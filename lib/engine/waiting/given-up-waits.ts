/**
 * The ids of the waits each client gave up (a fair lock's waiter ids, a semaphore's members), the
 * newest last: remembered when the wait ends without the lock, so a wait that was granted (nearly all)
 * costs nothing here. A hand-over told on the client's channel for a wait no longer waiting there is
 * passed on only when the wait was one of these: another client may have the same client id
 * (processes configured alike) and so hear the hand-overs to its waits, which it must not take from
 * their holder. (A hand-over that reached the wait before it gave up is passed on by its abandon.)
 */
const givenUpWaits = new WeakMap<object, Set<string>>();

/**
 * Ids kept per client: far more waits than end within a stale-waiter timeout. Beyond, a hand-over to an
 * ended wait is left to its acceptance lease.
 */
const GIVEN_UP_WAITS_KEPT = 10_000;

/** Wait `id` of `client` (its engine) ended without the lock. */
export function rememberGivenUpWait(client: object, id: string): void {
  let ids = givenUpWaits.get(client);
  if (!ids) givenUpWaits.set(client, (ids = new Set()));
  if (ids.has(id)) return;
  ids.add(id);
  if (ids.size > GIVEN_UP_WAITS_KEPT) ids.delete(ids.values().next().value!);
}

/** Whether wait `id` of `client` ended without the lock (see rememberGivenUpWait). */
export function isGivenUpWaitOf(client: object, id: string): boolean {
  return givenUpWaits.get(client)?.has(id) === true;
}
