import { randomUUID } from 'node:crypto';
import { ConnectionConfigError, createLockClient, ReplicaSyncError } from '../../lib';
import { quietLogger } from '../support/engine';
import { sharedTopology } from '../support/topologies';

describe('master-slave deployment', () => {
  const prefix = `ms-${randomUUID().slice(0, 8)}`;
  const topology = () => sharedTopology('replica');

  it('rejects a master address that is not a master, at start-up, with a clear message', async () => {
    const [replica, ...others] = topology().replicas;
    const error = await createLockClient({
      connection: { type: 'master-slave', master: replica, replicas: [topology().masters[0], ...others] },
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConnectionConfigError);
    expect((error as Error).message).toContain(`master 127.0.0.1:${replica.port} reports role "slave", not "master"`);
  });

  it('rejects bad connection options before connecting, listing every problem', async () => {
    const error = await createLockClient({
      connection: { type: 'master-slave', master: { host: '', port: 0 }, replicas: [{ host: 'x', port: 70000 }] },
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConnectionConfigError);
    expect((error as ConnectionConfigError).problems).toEqual([
      'master must be a { host, port } address',
      'replicas[0] is not a { host, port } address with a port in 1-65535',
    ]);
  });

  describe('replica sync', () => {
    it('waits for the replicas after an acquisition and succeeds when enough acknowledge', async () => {
      const locks = await createLockClient({
        connection: { type: 'master-slave', master: topology().masters[0], replicas: topology().replicas },
        keyPrefix: prefix,
        replicaSync: { replicas: 3, timeout: 2_000 },
        logger: quietLogger,
      });
      try {
        const handle = await locks.getLock('synced').lock();
        expect(await locks.getLock('synced').isLocked()).toBe(true);
        await handle.release();
      } finally {
        await locks.close();
      }
    });

    it('too few acknowledgements: the acquisition fails with ReplicaSyncError and the lock is released', async () => {
      const locks = await createLockClient({
        connection: { type: 'master-slave', master: topology().masters[0], replicas: topology().replicas },
        keyPrefix: prefix,
        replicaSync: { replicas: 4, timeout: 300 }, // only 3 replicas exist
        logger: quietLogger,
      });
      try {
        const error = await locks
          .getLock('unsynced')
          .lock()
          .catch((e: unknown) => e);
        expect(error).toBeInstanceOf(ReplicaSyncError);
        expect((error as ReplicaSyncError).acknowledged).toBe(3);
        expect(await locks.getLock('unsynced').isLocked()).toBe(false);
      } finally {
        await locks.close();
      }
    });

    it("onFailure 'warn' keeps the lock and logs", async () => {
      quietLogger.warnings.length = 0;
      const locks = await createLockClient({
        connection: { type: 'master-slave', master: topology().masters[0], replicas: topology().replicas },
        keyPrefix: prefix,
        replicaSync: { replicas: 4, timeout: 300, onFailure: 'warn' },
        logger: quietLogger,
      });
      try {
        const handle = await locks.getLock('warned').lock();
        expect(await locks.getLock('warned').isLocked()).toBe(true);
        expect(quietLogger.warnings.some((w) => w.includes('3 of 4 required replicas'))).toBe(true);
        await handle.release();
      } finally {
        await locks.close();
      }
    });
  });
});
