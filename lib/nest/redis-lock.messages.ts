/** Every message the Nest integration shows to users, in one place. Each ends with what to do about it. */

const TEMPLATE_HELP =
  'Write placeholders as dotted paths in braces, e.g. "article:{params.id}", and "{{" / "}}" for literal braces.';

export const messages = {
  connected: (where: string, prefix: string) => `Locks on ${where} (key prefix "${prefix}").`,
  invalidModuleOptions: (problems: string[]) =>
    `RedisLockModule options are invalid:\n${problems.map((p) => `  - ${p}`).join('\n')}\n` +
    'Fix them where you call RedisLockModule.forRoot() or in the factory given to forRootAsync().',

  observableNotDeclared: (owner: string) =>
    `${owner} returned an Observable, but its declared return type is not Observable, so the lock could only ` +
    'be held while the method ran, not while the Observable is subscribed. Declare its return type as ' +
    "Observable<…>, imported as a value from 'rxjs' (not `import type`), with emitDecoratorMetadata on.",

  // Problems listed by invalidModuleOptions / invalidDecorator, each naming the option to fix.
  noModuleOptions: () => 'options are missing: give at least { connection: { type: "single", url: "redis://…" } }',
  connectionProblem: (problem: string) => `connection: ${problem}`,
  badConflictStatus: (got: string) => `conflictStatus must be an HTTP error status (400-599), got ${got}`,
  badLogger: () => 'logger must have warn() and error() methods (a Nest Logger works)',
  badClientId: (got: string) => `clientId must be a non-empty string, got ${got}`,
  decoratorNotObject: (got: string) => `options must be an object such as { key: 'article:{params.id}' }, got ${got}`,
  unknownOption: (name: string) => `unknown option "${name}"`,
  badOnBusy: (got: string) => `onBusy must be 'throw' or 'skip', got ${got}`,
  redLockNeedsMasters: () =>
    'redLock.masters must be a non-empty array of connection options (one per independent master)',
  redLockMasterProblem: (index: number, problem: string) => `redLock.masters[${index}]: ${problem}`,
  badDriftFactor: (got: string) => `redLock.driftFactor must be a number in [0, 1), got ${got}`,
  noRedLockMasters: () =>
    "kind 'redlock' needs the module's redLock.masters (RedisLockModule.forRoot({ …, redLock: { masters: [...] } })), or pass LockClients to LockService.redLock(name, clients)",
  badMode: (got: string) => `mode must be 'read' or 'write', without a kind (or fair), got ${got}`,
  permitsOnePlainName: () => 'permits makes one name a semaphore: give one key and no kind (or fair)',
  badPermits: (got: string) => `permits must be a whole number >= 1, got ${got}`,
  redLockOneName: (count: number) => `kind 'redlock' locks one name, got ${count}`,
  badLockNames: () => 'the lock name must be a string or a non-empty array of strings',
  onBusyOnHandler: (type: string) =>
    `onBusy: 'skip' is for methods that are not handlers (scheduled jobs, consumers); this ${type} handler answers a busy lock itself (409 over HTTP)`,
  skippedBusy: (owner: string, name: string) => `${owner} skipped: lock "${name}" is held elsewhere (onBusy: 'skip')`,
  badKey: (key: string, reason: string) => `key "${key}": ${reason}`,
  badKeyType: (got: string) => `key must be a template string or a function, got ${got}`,
  badKind: (kinds: readonly string[], got: string) => `kind must be one of ${kinds.join(', ')}, got ${got}`,
  notBoolean: (field: string, got: string) => `${field} must be a boolean, got ${got}`,
  fairContradictsKind: (kind: string) => `fair: true contradicts kind: ${kind}; give one of them`,
  multiNeedsArray: () => 'multi() takes an array of lock names or locks.',

  invalidDecorator: (owner: string, problems: string[]) =>
    `@DistributedLock() on ${owner} is invalid:\n${problems.map((p) => `  - ${p}`).join('\n')}`,

  classLevelWithoutHandlers: (className: string) =>
    `@DistributedLock() on class ${className} applies to its route and message handlers, but it has none. ` +
    'Decorate the methods to lock instead.',

  notAMethod: (owner: string) =>
    `@DistributedLock() can decorate a class or an instance method; ${owner} is neither (a static method, getter or field). ` +
    'Move the work into an instance method of a provider.',

  unboundMethod: (owner: string) =>
    `${owner} is decorated with @DistributedLock() but no initialised RedisLockModule knows this instance. ` +
    'Call it on a provider or controller of an application that imports RedisLockModule (into its own module, ' +
    'unless the RedisLockModule is global), after app.init() (or from onModuleInit), and not after app.close().',

  ambiguousLockModule: (className: string, count: number) =>
    `${className} has @DistributedLock() methods and its module can inject ${count} RedisLockModules, so ` +
    'which one locks them is ambiguous. Give its module exactly one: import RedisLockModule.forRoot({ …, ' +
    'isGlobal: false }) into each feature module that locks, and keep the other ones out of its imports.',

  closing: (name?: string) =>
    `The application is shutting down: RedisLockModule takes no new lock${name ? ` (asked for "${name}")` : ''}.`,

  shutdownTimedOut: (count: number, timeoutMs: number) =>
    `${count} locked call(s) still ran ${timeoutMs} ms into shutdown; their locks are released now and ` +
    'their signals abort with LockLostError (closed): another instance may take the locks at once. ' +
    'Raise shutdownTimeout to give them longer.',

  callCancelled: (name: string) =>
    `The caller of the call holding lock "${name}" went away before its work ended; the lock is kept until ` +
    'that work stops.',

  callEnded: (name: string) =>
    `The result of the call holding lock "${name}" ended while work it started still ran; the lock is kept ` +
    'until that work stops.',

  workStillPending: (name: string, count: number, seconds: number) =>
    `Lock "${name}" is still held ${seconds} s after its call ended or its caller went away: ${count} promise(s) ` +
    "its work started have not settled. End that work on the lock's signal.",

  workNotAFunction: (got: string) =>
    `withLock() runs a function holding the lock, got ${got}. Pass the work as a function: withLock(name, () => work()).`,

  missingThis: (owner: string) =>
    `${owner} was called without its instance (\`this\` is undefined). Call it as a method, or bind it first.`,

  // Key templates.
  emptyTemplate: () => 'key is an empty string. Give a lock name or a template such as "article:{params.id}".',
  unclosedBrace: (position: number) => `unclosed "{" at position ${position}. ${TEMPLATE_HELP}`,
  strayBrace: (position: number) => `unmatched "}" at position ${position}. ${TEMPLATE_HELP}`,
  badPlaceholder: (placeholder: string) =>
    `placeholder ${placeholder} is not a dotted path of letters, digits, "_", "$" or "-". ${TEMPLATE_HELP}`,
  unknownRoot: (placeholder: string, allowed: readonly string[]) =>
    `placeholder ${placeholder} reads from an unknown source; use one of ${allowed.map((r) => `{${r}…}`).join(', ')}.`,
  methodKinds: {
    http: 'an HTTP route handler',
    rpc: 'an RPC message handler',
    ws: 'a WebSocket message handler',
    graphql: 'a GraphQL resolver',
    method: 'a method that is not a route or message handler',
  },
  wrongRoot: (placeholder: string, where: string, allowed: readonly string[]) =>
    `placeholder ${placeholder} cannot be used on ${where}; use ${allowed.map((r) => `{${r}…}`).join(', ')}.`,

  missingKeyValue: (template: string, placeholder: string) =>
    `The lock key "${template}" needs ${placeholder}, which is missing or empty in this call.`,
  notScalarKeyValue: (template: string, placeholder: string, got: string) =>
    `The lock key "${template}" needs ${placeholder} to be a string, number or boolean, got ${got}.`,
  keyFunctionResult: (got: string) =>
    `The lock key function returned ${got}; it must return a non-empty string (or a number).`,
  keyTooLong: (template: string, bytes: number, limit: number) =>
    `The lock key "${template}" resolved to a ${bytes}-byte name; the limit is ${limit} bytes.`,

  // What HTTP clients see (the lock name stays on the server: it is the exception's cause).
  httpConflict: () => 'The resource is locked by another request. Retry later.',
  httpUnavailable: () => 'The lock service is unavailable. Retry later.',
  transportFailure: (owner: string, code: string, why: string) => `${owner}: ${code}: ${why}`,
  httpClientGone: () => 'The client closed the request while it waited for a lock.',
};
