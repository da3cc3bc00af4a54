/** Where the engine reports what the caller cannot see otherwise (lost locks, failed renewals). */
export interface LockLogger {
  debug?(message: string): void;
  /** What the module connected to, at start-up (never credentials). */
  log?(message: string): void;
  warn(message: string): void;
  error(message: string): void;
}

export const consoleLogger: LockLogger = {
  warn: (message) => console.warn(`[redis-lock] ${message}`),
  error: (message) => console.error(`[redis-lock] ${message}`),
};
