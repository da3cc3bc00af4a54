import type { Redis } from 'ioredis';
import { keyPattern, mastersOf, scannedName, type ScannedKind } from '../engine/redis/key-scan';
import type { RedisClient } from '../engine/redis/redis-client';

/** Keys SCAN is asked to examine per call. */
const SCAN_COUNT = 250;

/** Where one master's SCAN stands. */
interface MasterCursor {
  cursor: string;
  done: boolean;
}

/**
 * The lock names under a prefix, found by SCAN (never KEYS) over every master, a bounded number of keys
 * per `step`: a large keyspace is covered over several steps, each continuing where the last stopped.
 * A name stays known until a whole pass over every master no longer finds it, or `forget` drops it.
 */
export class RollingScan {
  private readonly cursors = new Map<string, MasterCursor>();
  /** Names found in the pass under way, and in the last whole pass. */
  private current = new Map<string, ScannedKind>();
  private previous = new Map<string, ScannedKind>();
  private passes = 0;
  /** A step still running (its caller gave up waiting on a slow Redis): the next one is skipped. */
  private busy = false;

  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
  ) {}

  /** Whole passes so far (over every master). */
  get completedPasses(): number {
    return this.passes;
  }

  /** The known names with the family of key that named them. */
  names(): Map<string, ScannedKind> {
    return new Map([...this.previous, ...this.current]);
  }

  forget(name: string): void {
    this.current.delete(name);
    this.previous.delete(name);
  }

  /**
   * Examines about `budget` keys (SCAN COUNT is a hint Redis mostly keeps), taking the masters in turn.
   * Returns the SCAN calls made.
   */
  async step(budget: number): Promise<number> {
    // Never two at once: they would move the same cursors, and queueing them would pile up on a stuck Redis.
    if (this.busy) return 0;
    this.busy = true;
    try {
      return await this.stepNow(budget);
    } finally {
      this.busy = false;
    }
  }

  private async stepNow(budget: number): Promise<number> {
    const masters = mastersOf(this.redis);
    const cursors = masters.map((node) => this.cursorOf(node));
    const match = keyPattern(this.redis, this.prefix);
    let calls = 0;
    let left = budget;
    for (let i = 0; i < masters.length && left > 0; i++) {
      const state = cursors[i];
      while (!state.done && left > 0) {
        const count = Math.min(SCAN_COUNT, left);
        const [next, keys] = await masters[i].scan(state.cursor, 'MATCH', match, 'COUNT', count);
        calls++;
        left -= count;
        for (const key of keys) {
          const found = scannedName(this.redis, this.prefix, key);
          if (found && !this.current.has(found.name)) this.current.set(found.name, found.kind);
        }
        state.cursor = next;
        if (next === '0') state.done = true;
      }
    }
    if (cursors.every((c) => c.done)) {
      // A whole pass: what it found is the truth; the next pass starts over.
      this.previous = this.current;
      this.current = new Map();
      this.passes++;
      for (const c of this.cursors.values()) Object.assign(c, { cursor: '0', done: false });
      // Masters that left the cluster are dropped; new ones start at 0 on the next step.
      const live = new Set(masters.map(addressOf));
      for (const address of this.cursors.keys()) if (!live.has(address)) this.cursors.delete(address);
    }
    return calls;
  }

  private cursorOf(node: Redis): MasterCursor {
    const address = addressOf(node);
    let state = this.cursors.get(address);
    if (!state) this.cursors.set(address, (state = { cursor: '0', done: false }));
    return state;
  }
}

const addressOf = (node: Redis): string => `${node.options.host}:${node.options.port}`;
