/** Helpers shared by the GraphQL, microservice and WebSocket tests. */
import type { LoggerService } from '@nestjs/common';
import type { LockLogger } from '../../lib';

/** A Nest logger that records every call, so a test can check that nothing was logged as an error. */
export function capturingLogger(): LoggerService & { error: jest.Mock } {
  return {
    log: jest.fn(),
    error: jest.fn(),
    warn: jest.fn(),
    debug: jest.fn(),
    verbose: jest.fn(),
    fatal: jest.fn(),
  };
}

/** The lock module's logger for those tests: what it logged, by level. */
export function recordingLockLogger(): LockLogger & {
  debug: (message: string) => void;
  readonly lines: { debug: string[]; warnings: string[]; errors: string[] };
  clear(): void;
} {
  const lines = { debug: [] as string[], warnings: [] as string[], errors: [] as string[] };
  return {
    lines,
    debug: (message) => lines.debug.push(message),
    warn: (message) => lines.warnings.push(message),
    error: (message) => lines.errors.push(message),
    clear() {
      lines.debug.length = lines.warnings.length = lines.errors.length = 0;
    },
  };
}
