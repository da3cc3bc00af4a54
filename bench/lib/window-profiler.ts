/**
 * BENCH_PROFILE_DIR=<dir>: each worker records a V8 CPU profile of exactly the measurement window
 * (from the bench's 'mark' to its 'stop') and writes it there, so start-up and shutdown never blur
 * where the time of a contended acquisition goes. Off unless the variable is set.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Session } from 'node:inspector/promises';

const dir = process.env.BENCH_PROFILE_DIR;
let session: Session | undefined;

export async function startWindowProfile(): Promise<void> {
  if (!dir) return;
  session ??= new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 500 });
  await session.post('Profiler.start');
}

export async function stopWindowProfile(label: string): Promise<void> {
  if (!dir || !session) return;
  const { profile } = await session.post('Profiler.stop');
  session.disconnect();
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, `${label}-${process.pid}.cpuprofile`), JSON.stringify(profile));
}
