import { types } from 'node:util';

/** Also an Error made in another realm (Node's own socket errors, seen from a vm context such as jest's). */
export function isError(value: unknown): value is Error {
  return value instanceof Error || types.isNativeError(value);
}
