import { LockError } from './lock-error';

/**
 * The connection settings (in code or from the environment) are unusable. Lists every problem at
 * once, each with the option or variable to fix. Never contains a password.
 */
export class ConnectionConfigError extends LockError {
  constructor(readonly problems: string[]) {
    super(`Redis lock connection is misconfigured:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
  }
}
