// A process configured the way an application deploys it: lock client options from REDIS_* variables
// only (lockOptionsFromEnv). Takes and releases one lock, prints the outcome as JSON.
import { createLockClient, lockOptionsFromEnv } from '../../lib';

async function main(): Promise<void> {
  const locks = await createLockClient({
    ...lockOptionsFromEnv(),
    logger: { warn: () => undefined, error: () => undefined },
  });
  try {
    const handle = await locks.getLock('from-env').lock({ leaseTime: 10_000 });
    console.log(JSON.stringify({ fencingToken: handle.fencingToken, outcome: await handle.release() }));
  } finally {
    await locks.close();
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
