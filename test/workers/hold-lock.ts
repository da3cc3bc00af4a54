// Acquires LOCK_NAME (lease LEASE_MS, or the watchdog when unset), prints "acquired", then holds it
// until killed; prints "lost" if the client reports the lock lost meanwhile. LOCK_KIND 'redlock': a
// RedLock over the masters in REDLOCK_PORTS instead (see workerRedLock).
import { workerClient, workerLock, workerRedLock } from './worker-client';

async function main(): Promise<void> {
  const leaseTime = process.env.LEASE_MS ? Number(process.env.LEASE_MS) : undefined;
  if (process.env.LOCK_KIND === 'redlock') {
    const { redLock } = workerRedLock(process.env.LOCK_NAME!);
    redLock.clients[0].on('lockLost', () => console.log('lost'));
    const handle = await redLock.lock({ leaseTime });
    console.log('acquired');
    console.log(JSON.stringify({ fencingTokens: handle.fencingTokens }));
  } else {
    const { locks } = await workerClient();
    locks.on('lockLost', () => console.log('lost'));
    const handle = await workerLock(locks, process.env.LOCK_NAME!).lock({ leaseTime });
    console.log('acquired');
    console.log(JSON.stringify({ fencingToken: handle.fencingToken }));
  }
  setInterval(() => undefined, 1000); // stay alive until killed
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
