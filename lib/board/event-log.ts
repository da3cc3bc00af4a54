/** What happened to a lock, as the board lists it. */
export type BoardEventType = 'acquired' | 'released' | 'expired' | 'lost' | 'timed-out' | 'forced';

/** One event of this process's locks (or a force-unlock from the board). */
export interface BoardEvent {
  /** Epoch ms. */
  at: number;
  type: BoardEventType;
  name: string;
  kind?: string;
  owner?: string;
  label?: string;
  /** Why, in words: a release's outcome, a loss's reason, who was force-unlocked. */
  reason?: string;
  waitedMs?: number;
  heldMs?: number;
}

/** The last `capacity` events, newest first: a ring, so a busy process costs bounded memory. */
export class EventLog {
  private readonly ring: BoardEvent[] = [];
  private next = 0;

  constructor(private readonly capacity: number) {}

  add(event: BoardEvent): void {
    if (this.ring.length < this.capacity) this.ring.push(event);
    else this.ring[this.next] = event;
    this.next = (this.next + 1) % this.capacity;
  }

  /** Newest first. */
  recent(): BoardEvent[] {
    const oldestFirst =
      this.ring.length < this.capacity ? this.ring : [...this.ring.slice(this.next), ...this.ring.slice(0, this.next)];
    return [...oldestFirst].reverse();
  }
}
