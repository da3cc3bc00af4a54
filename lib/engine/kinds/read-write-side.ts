import { randomUUID } from 'node:crypto';
import type { EngineContext } from '../client/engine-context';
import { lockKeys, readWriteKeys, type LockKeys, type ReadWriteKeys } from '../redis/keys';
import { LockBase, type RawRelease } from '../lock/lock-base';
import { releaseCallOf } from '../holds/hold-id-calls';
import type { HandOver } from '../turns/process-turns';
import { READ_UNLOCK, READ_WRITE_FORCE_UNLOCK, WRITE_UNLOCK } from '../scripts/catalog';

/** The keys LockBase works with, for one side: its hold, the fence, the channel its waiters hear. */
export function sideKeys(side: 'read' | 'write') {
  return (prefix: string, name: string): LockKeys => {
    const rw = readWriteKeys(prefix, name);
    // The plain lock's waiting / queue keys stay unused: both sides wait in their own way.
    return side === 'read'
      ? { ...lockKeys(prefix, name), lock: rw.readers, fence: rw.fence, channel: rw.readChannel }
      : { ...lockKeys(prefix, name), lock: rw.write, fence: rw.fence, channel: rw.writeChannel };
  };
}

/** What both sides share: the read-write keys, holds recorded by id, and the hold count query. */
export abstract class ReadWriteSide extends LockBase {
  readonly rw: ReadWriteKeys;

  constructor(engine: EngineContext, name: string, side: 'read' | 'write') {
    super(engine, name, sideKeys(side));
    this.rw = readWriteKeys(engine.keyPrefix, name);
  }

  /**
   * Releases this side's hold `holdId`; without one (an unlock by owner of a hold taken elsewhere), any
   * hold of `owner` on this side, under the call's id `callId`. Both sides' scripts take the same arguments.
   */
  protected releaseOnce(
    owner: string,
    leaseMs: number,
    holdId?: string,
    _handOver?: HandOver,
    callId?: string,
  ): Promise<RawRelease> {
    const script = this.kind === 'read' ? READ_UNLOCK : WRITE_UNLOCK;
    return script.run(this.engine.redis, this.rw, {
      owner,
      ...releaseCallOf(holdId, this.engine.newHoldId, callId),
      leaseMs,
      publish: this.engine.publishCommand,
    });
  }

  protected forceSide(side: 'read' | 'write'): Promise<boolean> {
    const { redis, publishCommand } = this.engine;
    const force = READ_WRITE_FORCE_UNLOCK.run(redis, this.rw, { side, publish: publishCommand, callId: randomUUID() });
    return this.bounded(force, 'forceUnlock');
  }

  /** How many holds of this side the current scope's owner (or `owner`) has; 0 when none. */
  abstract getHoldCount(owner?: string): Promise<number>;
}
