import { validityClock, type ValidityEnd } from '../../lib/engine/groups/validity-clock';
import { monotonicNow } from '../../lib/engine/util/clock';

/** An acquisition's end as the clock sees it: resolves `came` when called back, and counts the calls. */
function end(): ValidityEnd & { calls: number; came: Promise<void> } {
  let resolve!: () => void;
  const came = new Promise<void>((r) => (resolve = r));
  const watched = {
    calls: 0,
    came,
    endCame(): void {
      watched.calls++;
      resolve();
    },
  };
  return watched;
}

const HOUR_MS = 3_600_000;

describe('validityClock (one timer for every RedLock validity)', () => {
  it('calls back an end watched after a later one at its own time: the timer is armed again for it', async () => {
    const later = end();
    const sooner = end();
    validityClock.watch(later, monotonicNow() + HOUR_MS);
    validityClock.watch(sooner, monotonicNow() + 20);
    try {
      await sooner.came;
      expect(sooner.calls).toBe(1);
      expect(later.calls).toBe(0);
    } finally {
      validityClock.unwatch(later);
    }
  });

  it('does not call back an end moved later (a renewal) at its old time, nor one unwatched (a release)', async () => {
    const renewed = end();
    const released = end();
    const witness = end();
    validityClock.watch(renewed, monotonicNow() + 10);
    validityClock.watch(released, monotonicNow() + 10);
    validityClock.unwatch(released);
    validityClock.watch(renewed, monotonicNow() + HOUR_MS);
    // Due after both old ends: by the time it is called back, they have passed.
    validityClock.watch(witness, monotonicNow() + 40);
    try {
      await witness.came;
      expect(renewed.calls).toBe(0);
      expect(released.calls).toBe(0);
    } finally {
      validityClock.unwatch(renewed);
    }
  });

  it('an end watched again from its own callback (a renewal that landed) is called back again at the new end', async () => {
    let calls = 0;
    let resolve!: () => void;
    const second = new Promise<void>((r) => (resolve = r));
    const rewatched: ValidityEnd = {
      endCame(): void {
        if (++calls === 1) validityClock.watch(rewatched, monotonicNow() + 10);
        else resolve();
      },
    };
    validityClock.watch(rewatched, monotonicNow() + 10);
    await second;
    expect(calls).toBe(2);
  });
});
