/**
 * The ids of the waits each client ran that may have queued for a hand-over (a fair lock's waiter
 * ids, a semaphore's members), the newest last. A hand-over told on the client's channel for a wait no
 * longer waiting there is passed on only when the wait was this client's own: another client may have
 * the same client id (processes configured alike) and so hear the hand-overs to its waits, which it
 * must not take from their holder.
 */
const queuedWaits = new WeakMap<object, Set<string>>();

/**
 * Ids kept per client: far more waits than end within a stale-waiter timeout. Beyond, a hand-over to an
 * ended wait is left to its acceptance lease.
 */
const QUEUED_WAITS_KEPT = 10_000;

/** Wait `id` of `client` (its engine) may have queued. */
export function rememberQueuedWait(client: object, id: string): void {
  let ids = queuedWaits.get(client);
  if (!ids) queuedWaits.set(client, (ids = new Set()));
  if (ids.has(id)) return;
  ids.add(id);
  if (ids.size > QUEUED_WAITS_KEPT) ids.delete(ids.values().next().value!);
}

/** Whether wait `id` was one of `client`'s (see rememberQueuedWait). */
export function isQueuedWaitOf(client: object, id: string): boolean {
  return queuedWaits.get(client)?.has(id) === true;
}
