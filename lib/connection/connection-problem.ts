import { types } from 'node:util';
import { refusedCredentials } from './refused-credentials';
import { refusedTls } from './refused-tls';

/**
 * A connection error in words for an operator: what to fix when Redis refused the connection's
 * settings (credentials, TLS), else the error's own message; undefined for no error.
 */
export function connectionProblem(error: Error | undefined): string | undefined {
  if (error === undefined || !(error instanceof Error || types.isNativeError(error))) return undefined;
  const refused = refusedCredentials(error) ?? refusedTls(error);
  return refused ? refused.problems.join('; ') : error.message;
}
