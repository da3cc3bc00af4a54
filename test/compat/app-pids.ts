/**
 * The app processes the compatibility suite starts (and its temp dir), recorded in a file so that jest's
 * own process can SIGKILL them and remove the dir if the run is interrupted (Ctrl-C, SIGTERM): the test
 * file runs in jest's sandbox, whose `process.on('exit')` never fires for the real process, so
 * global-setup.ts installs that handler. Only a recorded pid that still runs `dist/main.js` in its
 * recorded app dir is signalled (pid reuse; Linux /proc, elsewhere nothing is signalled and the apps
 * stop on the terminal's SIGINT by themselves).
 */
import { readFileSync, readlinkSync, realpathSync, rmSync, writeFileSync } from 'node:fs';

export const APP_PIDS_ENV = 'COMPAT_APP_PIDS_FILE';

export interface RecordedApp {
  pid: number;
  dir: string;
}

interface RunRecord {
  /** Removed with the apps (the test's afterAll removes it otherwise). */
  workDir?: string;
  apps: RecordedApp[];
}

/** Updates the record (no-op outside jest.compat.config.js, whose global setup names the file). */
function update(change: Partial<RunRecord>): void {
  const file = process.env[APP_PIDS_ENV];
  if (file) writeFileSync(file, JSON.stringify({ ...read(file), ...change }));
}

function read(file: string): RunRecord | undefined {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as RunRecord;
  } catch {
    return undefined;
  }
}

/** Replaces the recorded apps with the ones running now. */
export function recordApps(apps: RecordedApp[]): void {
  update({ apps });
}

export function recordWorkDir(workDir: string | undefined): void {
  update({ workDir });
}

/**
 * SIGKILLs the recorded apps that still run, removes the recorded temp dir, then the record itself.
 * Synchronous: usable from 'exit'.
 */
export function killRecordedApps(file: string): void {
  const record = read(file);
  if (!record) return;
  for (const { pid, dir } of record.apps ?? []) {
    if (!isOurApp(pid, dir)) continue;
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // exited meanwhile
    }
  }
  if (record.workDir) rmSync(record.workDir, { recursive: true, force: true });
  rmSync(file, { force: true });
}

function isOurApp(pid: number, dir: string): boolean {
  try {
    return (
      readlinkSync(`/proc/${pid}/cwd`) === realpathSync(dir) &&
      readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').includes('dist/main.js')
    );
  } catch {
    return false; // exited, a zombie, or no /proc
  }
}
