import { PATH_METADATA } from '@nestjs/common/constants';
import { LockOptionsError } from '../../engine/errors';
import type { DistributedLockOptions, LockKeyFactory } from './distributed-lock.options';
import { parseKeyTemplate, type KeyRoot, type KeyTemplate } from './key-template';
import { LOCK_KINDS, type LockKind } from '../service/lock-service.options';
import { DISTRIBUTED_LOCK_METADATA } from '../redis-lock.constants';
import { durationProblem, labelProblem, LEASE_RULE, show, WAIT_RULE } from '../../engine/util/validation';
import { messages } from '../redis-lock.messages';

/**
 * How Nest calls a method: as an HTTP route, an RPC message pattern, a WebSocket message handler or a
 * GraphQL resolver (`@Query`, `@Mutation`, `@ResolveField`…).
 */
export type HandlerType = 'http' | 'rpc' | 'ws' | 'graphql';

/** `@DistributedLock()` options, validated and compiled for one method. */
export interface LockSpec {
  /** "Class.method", for messages. */
  readonly owner: string;
  /** The key template (the first, for a list of keys) or function. */
  readonly key: KeyTemplate | LockKeyFactory<unknown[]>;
  /** Every key template, in the order given: several for a multi-key lock; none for a key function. */
  readonly keys: readonly KeyTemplate[];
  readonly kind: LockKind;
  readonly waitTime?: number;
  readonly leaseTime?: number | 'watchdog';
  readonly newScope: boolean;
  /** Methods that are not handlers: 'skip' resolves undefined (logged at debug) when the lock is busy. */
  readonly onBusy: 'throw' | 'skip';
  /** Set when Nest calls the method as a handler: the interceptor locks it, over the request / message. */
  readonly handlerType?: HandlerType;
  /** A semaphore of this many permits instead of a lock: one permit per call. */
  readonly permits?: number;
  /** A read-write lock instead of a lock: its read or its write side. */
  readonly mode?: 'read' | 'write';
  /** The bounded name for events and metrics: the `label` option, else the key template's source. */
  readonly label?: string;
}

/**
 * Metadata keys of @nestjs/microservices' @MessagePattern / @EventPattern, @nestjs/websockets'
 * @SubscribeMessage and @nestjs/graphql's resolver decorators (every one of which sets a resolver name).
 */
const RPC_PATTERN_METADATA = 'microservices:pattern';
const WS_MESSAGE_METADATA = 'message';
const GRAPHQL_RESOLVER_NAME_METADATA = 'graphql:resolver_name';

const ROOTS: Record<HandlerType | 'method', readonly KeyRoot[]> = {
  http: ['params', 'query', 'body', 'headers', 'user'],
  rpc: ['data'],
  ws: ['data'],
  // A resolver's GraphQL arguments, `{args.id}`; `{args.1.id}` (root, args, context, info) also works.
  graphql: ['args'],
  method: ['args'],
};

const KNOWN_OPTIONS = new Set([
  'key',
  'kind',
  'fair',
  'waitTime',
  'leaseTime',
  'newScope',
  'onBusy',
  'label',
  'permits',
  'mode',
]);

export function handlerTypeOf(method: object): HandlerType | undefined {
  if (Reflect.hasOwnMetadata(PATH_METADATA, method)) return 'http';
  if (Reflect.hasOwnMetadata(RPC_PATTERN_METADATA, method)) return 'rpc';
  if (Reflect.hasOwnMetadata(WS_MESSAGE_METADATA, method)) return 'ws';
  if (Reflect.hasOwnMetadata(GRAPHQL_RESOLVER_NAME_METADATA, method)) return 'graphql';
  return undefined;
}

/**
 * Compiled specs are cached next to the options they are compiled from, as Reflect metadata: on the
 * method for its own decorator, on the class (one entry per handler) for a class decorator. Like those
 * options they are the same for every application in the process.
 */
const OWN_SPEC = Symbol('redis-lock:own-spec');
const HANDLER_SPECS = Symbol('redis-lock:handler-specs');

/**
 * The compiled lock of `method` of class `classRef`: its own `@DistributedLock()`, else the class's
 * when the method is a handler; null when it has none. Throws LockOptionsError naming the class and
 * method when the options are invalid. Cached.
 */
export function lockSpecOf(classRef: object, method: object, methodName: string = nameOf(method)): LockSpec | null {
  const cached = Reflect.getOwnMetadata(OWN_SPEC, method) as LockSpec | undefined;
  if (cached !== undefined) return cached;
  const owner = `${nameOf(classRef)}.${methodName}`;
  const handlerType = handlerTypeOf(method);
  const own = Reflect.getOwnMetadata(DISTRIBUTED_LOCK_METADATA, method) as unknown;
  if (own !== undefined) {
    const spec = compileLockSpec(own, owner, handlerType);
    Reflect.defineMetadata(OWN_SPEC, spec, method);
    return spec;
  }
  if (!handlerType) return null;
  let perClass = Reflect.getOwnMetadata(HANDLER_SPECS, classRef) as WeakMap<object, LockSpec | null> | undefined;
  if (!perClass) Reflect.defineMetadata(HANDLER_SPECS, (perClass = new WeakMap()), classRef);
  let spec = perClass.get(method);
  if (spec === undefined) {
    const options = Reflect.getMetadata(DISTRIBUTED_LOCK_METADATA, classRef) as unknown;
    spec = options === undefined ? null : compileLockSpec(options, `${owner} (from the class decorator)`, handlerType);
    perClass.set(method, spec);
  }
  return spec;
}

/** Validates `options` for a method called `owner`; throws one LockOptionsError listing every problem. */
export function compileLockSpec(options: unknown, owner: string, handlerType?: HandlerType): LockSpec {
  const problems: string[] = [];
  const fail = () => new LockOptionsError(messages.invalidDecorator(owner, problems));
  if (!options || typeof options !== 'object') {
    problems.push(messages.decoratorNotObject(show(options)));
    throw fail();
  }
  const o = options as DistributedLockOptions<unknown[]>;
  for (const name of Object.keys(o)) if (!KNOWN_OPTIONS.has(name)) problems.push(messages.unknownOption(name));

  let key: KeyTemplate | LockKeyFactory<unknown[]> | undefined;
  const keys: KeyTemplate[] = [];
  const parse = (source: string) => {
    try {
      const template = parseKeyTemplate(source);
      const allowed = ROOTS[handlerType ?? 'method'];
      for (const p of template.placeholders) {
        if (!allowed.includes(p.root))
          problems.push(messages.wrongRoot(p.text, messages.methodKinds[handlerType ?? 'method'], allowed));
      }
      keys.push(template);
    } catch (error) {
      problems.push(messages.badKey(source, (error as Error).message));
    }
  };
  if (typeof o.key === 'function') key = o.key;
  else if (typeof o.key === 'string') parse(o.key);
  else if (Array.isArray(o.key) && o.key.length > 0 && o.key.every((k) => typeof k === 'string')) {
    o.key.forEach(parse);
  } else problems.push(messages.badKeyType(show(o.key)));
  key ??= keys[0];
  const kind = o.kind ?? (o.fair ? 'fair' : 'reentrant');
  if (kind === 'redlock' && keys.length > 1) problems.push(messages.redLockOneName(keys.length));
  if (
    o.mode !== undefined &&
    ((o.mode !== 'read' && o.mode !== 'write') || o.kind !== undefined || o.fair !== undefined)
  ) {
    problems.push(messages.badMode(show(o.mode)));
  }
  if (o.mode !== undefined && o.permits !== undefined) problems.push(messages.permitsOnePlainName());
  if (o.permits !== undefined) {
    if (!(typeof o.permits === 'number' && Number.isInteger(o.permits) && o.permits >= 1)) {
      problems.push(messages.badPermits(show(o.permits)));
    }
    if (keys.length > 1 || o.kind !== undefined || o.fair !== undefined) problems.push(messages.permitsOnePlainName());
  }

  if (o.kind !== undefined && !LOCK_KINDS.includes(o.kind)) {
    problems.push(messages.badKind(LOCK_KINDS, show(o.kind)));
  }
  if (o.fair !== undefined && typeof o.fair !== 'boolean') problems.push(messages.notBoolean('fair', show(o.fair)));
  if (o.fair === true && o.kind !== undefined && o.kind !== 'fair') {
    problems.push(messages.fairContradictsKind(show(o.kind)));
  }
  if (o.newScope !== undefined && typeof o.newScope !== 'boolean') {
    problems.push(messages.notBoolean('newScope', show(o.newScope)));
  }
  const wait = durationProblem('waitTime', o.waitTime, { ...WAIT_RULE, infinite: true });
  if (wait) problems.push(wait);
  if (o.leaseTime !== 'watchdog') {
    const lease = durationProblem('leaseTime', o.leaseTime, { ...LEASE_RULE, watchdog: true });
    if (lease) problems.push(lease);
  }
  if (o.onBusy !== undefined && o.onBusy !== 'throw' && o.onBusy !== 'skip') {
    problems.push(messages.badOnBusy(show(o.onBusy)));
  } else if (o.onBusy === 'skip' && handlerType) {
    problems.push(messages.onBusyOnHandler(handlerType));
  }
  const label = labelProblem(o.label);
  if (label) problems.push(label);
  if (problems.length > 0 || key === undefined) throw fail();
  return {
    owner,
    key,
    keys,
    kind,
    waitTime: o.waitTime,
    leaseTime: o.leaseTime,
    newScope: o.newScope ?? false,
    onBusy: o.onBusy ?? 'throw',
    handlerType,
    permits: o.permits,
    mode: o.mode,
    label: o.label ?? (typeof o.key === 'function' ? undefined : keys.map((k) => k.source).join('+')),
  };
}

function nameOf(value: object): string {
  const name = (value as { name?: unknown }).name;
  return typeof name === 'string' && name.length > 0 ? name : '(anonymous)';
}
