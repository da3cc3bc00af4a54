import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type Redis from 'ioredis';

export interface MachineInfo {
  date: string;
  cpuModel: string;
  cores: number;
  os: string;
  node: string;
  redis: string;
  versions: Record<string, string>;
  /** 1-minute load average when the run started and when it ended (other work on the machine skews numbers). */
  loadStart: number;
  loadEnd?: number;
}

const ROOT = path.join(__dirname, '..', '..');

function packageVersion(name: string): string {
  try {
    const file = path.join(ROOT, 'node_modules', name, 'package.json');
    return (JSON.parse(fs.readFileSync(file, 'utf8')) as { version: string }).version;
  } catch {
    return 'unknown';
  }
}

export async function machineInfo(admin: Redis): Promise<MachineInfo> {
  const server = await admin.info('server');
  const own = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { name: string; version: string };
  return {
    date: new Date().toISOString(),
    cpuModel: os.cpus()[0]?.model.trim() ?? 'unknown',
    cores: os.cpus().length,
    os: `${os.type()} ${os.release()} ${os.arch()}`,
    node: process.version,
    redis: /redis_version:(\S+)/.exec(server)?.[1] ?? 'unknown',
    loadStart: os.loadavg()[0],
    versions: {
      [own.name]: `${own.version} (this repository, compiled: dist/lib)`,
      ioredis: packageVersion('ioredis'),
      '@sesamecare-oss/redlock': packageVersion('@sesamecare-oss/redlock'),
      'redis-semaphore': packageVersion('redis-semaphore'),
      tsx: packageVersion('tsx'),
    },
  };
}
