import { MAX_NAME_BYTES } from '../../engine/util/validation';
import { LockKeyError } from '../errors/lock-key-error';
import { messages } from '../redis-lock.messages';

/**
 * Where a placeholder reads from: the HTTP request (`params`, `query`, `body`, `headers`, `user`), an
 * RPC or WebSocket message (`data`), or the arguments of a plain method (`args`; `{0}` is short for
 * `{args.0}`).
 */
export type KeyRoot = 'params' | 'query' | 'body' | 'headers' | 'user' | 'data' | 'args';

export const KEY_ROOTS: readonly KeyRoot[] = ['params', 'query', 'body', 'headers', 'user', 'data', 'args'];

/** One `{…}` of a template: its text as written and the path it reads, starting with its root. */
export interface KeyPlaceholder {
  readonly text: string;
  readonly root: KeyRoot;
  readonly path: readonly string[];
}

/** A parsed key template such as `'article:{params.id}'`. */
export interface KeyTemplate {
  readonly source: string;
  readonly parts: readonly (string | KeyPlaceholder)[];
  readonly placeholders: readonly KeyPlaceholder[];
}

/** The values placeholders read from, by root. */
export type KeySources = Partial<Record<KeyRoot, unknown>>;

const SEGMENT = /^[A-Za-z0-9_$-]+$/;

/**
 * Parses a key template. Throws an Error whose message says what is wrong (the caller adds where).
 * `{{` and `}}` stand for literal braces (which the engine percent-encodes in the Redis key anyway).
 */
export function parseKeyTemplate(source: string): KeyTemplate {
  if (source.length === 0) throw new Error(messages.emptyTemplate());
  const parts: (string | KeyPlaceholder)[] = [];
  let literal = '';
  for (let i = 0; i < source.length; i++) {
    const c = source[i];
    if ((c === '{' || c === '}') && source[i + 1] === c) {
      literal += c;
      i++;
      continue;
    }
    if (c === '}') throw new Error(messages.strayBrace(i));
    if (c !== '{') {
      literal += c;
      continue;
    }
    const end = source.indexOf('}', i + 1);
    if (end === -1) throw new Error(messages.unclosedBrace(i));
    if (literal) parts.push(literal);
    literal = '';
    parts.push(parsePlaceholder(source.slice(i, end + 1)));
    i = end;
  }
  if (literal) parts.push(literal);
  return { source, parts, placeholders: parts.filter((p): p is KeyPlaceholder => typeof p !== 'string') };
}

function parsePlaceholder(text: string): KeyPlaceholder {
  const segments = text.slice(1, -1).split('.');
  if (!segments.every((s) => SEGMENT.test(s))) throw new Error(messages.badPlaceholder(text));
  // `{0.id}` is `{args.0.id}`.
  const path = /^\d+$/.test(segments[0]) ? ['args', ...segments] : segments;
  const root = path[0] as KeyRoot;
  if (!KEY_ROOTS.includes(root)) throw new Error(messages.unknownRoot(text, KEY_ROOTS));
  // Node lower-cases incoming header names.
  if (root === 'headers' && path.length > 1) path[1] = path[1].toLowerCase();
  return { text, root, path };
}

/**
 * Renders a template over `sources`. A placeholder whose value is missing, empty or not a scalar
 * throws LockKeyError: a lock on "article:undefined" would serialise unrelated requests.
 */
export function renderKeyTemplate(template: KeyTemplate, sources: KeySources): string {
  let name = '';
  for (const part of template.parts) {
    name += typeof part === 'string' ? part : scalar(template.source, part, lookup(sources, part.path));
  }
  return checkLength(template.source, name);
}

/** Validates what a key function returned. */
/** What a key function returned, as lock names: one, or a non-empty list (a multi-key lock). */
export function keyFunctionNames(value: unknown): string[] {
  if (!Array.isArray(value)) return [keyFunctionResult(value)];
  if (value.length === 0) throw new LockKeyError(messages.keyFunctionResult('an empty array'), '(key function)');
  return value.map(keyFunctionResult);
}

export function keyFunctionResult(value: unknown): string {
  const label = '(key function)';
  if (typeof value === 'number' && Number.isFinite(value)) return checkLength(label, String(value));
  if (typeof value !== 'string' || value.length === 0) {
    throw new LockKeyError(messages.keyFunctionResult(describe(value)), label);
  }
  return checkLength(label, value);
}

function lookup(sources: KeySources, path: readonly string[]): unknown {
  let value: unknown = sources[path[0] as KeyRoot];
  for (const segment of path.slice(1)) {
    if (value === null || value === undefined) return undefined;
    value = property(value, segment);
  }
  return value;
}

/**
 * An own property of `value`, or a getter its class defines (an ORM entity's, a Passport user's `id`).
 * Nothing of Object.prototype ("{params.constructor}", "{body.__proto__}") and no method is read.
 */
function property(value: unknown, segment: string): unknown {
  if (Object.prototype.hasOwnProperty.call(value, segment)) return (value as Record<string, unknown>)[segment];
  if (typeof value !== 'object') return undefined;
  for (let proto = Object.getPrototypeOf(value) as object | null; proto; proto = Object.getPrototypeOf(proto)) {
    if (proto === Object.prototype) return undefined;
    const found = Object.getOwnPropertyDescriptor(proto, segment);
    // The nearest definition wins: a method there hides a getter further up.
    if (found) return found.get ? (found.get.call(value) as unknown) : undefined;
  }
  return undefined;
}

function scalar(template: string, placeholder: KeyPlaceholder, value: unknown): string {
  if (value === undefined || value === null || value === '') {
    throw new LockKeyError(messages.missingKeyValue(template, placeholder.text), template, placeholder.text);
  }
  if (typeof value === 'string') return value;
  if (
    (typeof value === 'number' && Number.isFinite(value)) ||
    typeof value === 'bigint' ||
    typeof value === 'boolean'
  ) {
    return String(value);
  }
  throw new LockKeyError(
    messages.notScalarKeyValue(template, placeholder.text, describe(value)),
    template,
    placeholder.text,
  );
}

function checkLength(template: string, name: string): string {
  const bytes = Buffer.byteLength(name);
  if (bytes > MAX_NAME_BYTES) throw new LockKeyError(messages.keyTooLong(template, bytes, MAX_NAME_BYTES), template);
  return name;
}

function describe(value: unknown): string {
  if (Array.isArray(value)) return 'an array';
  if (value === null || value === undefined) return String(value);
  if (typeof value === 'string') return value.length === 0 ? 'an empty string' : JSON.stringify(value);
  if (typeof value === 'object') return 'an object';
  return typeof value === 'number' ? String(value) : `a ${typeof value}`;
}
