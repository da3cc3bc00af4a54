/** Command line of `npm run demo` (scripts/demo.ts). */

export const VERSIONS = ['v1', 'v2', 'v3', 'v4', 'v5'] as const;
export type Version = (typeof VERSIONS)[number];

/** The versions that take a distributed lock: they must count every request (the exit code gates on them). */
export const LOCKED_VERSIONS: readonly Version[] = ['v3', 'v4', 'v5'];

export type BalancerChoice = 'auto' | 'nginx' | 'builtin';

export interface DemoArgs {
  requests: number;
  concurrency: number;
  versions: Version[];
  json: boolean;
  keep: boolean;
  /** After the runs, keep the apps and Redis up (until Ctrl-C) to look at the lock board. */
  board: boolean;
  help: boolean;
  verbose: boolean;
  balancer: BalancerChoice;
  /** The load balancer's port; undefined = 3100 or the next free one. */
  port?: number;
  /** The two app instances' ports; undefined = 3101, 3102 or the next free ones. */
  appPorts?: [number, number];
}

export const DEFAULT_REQUESTS = 666;
export const DEFAULT_CONCURRENCY = 666;

export const USAGE = `usage: npm run demo -- [options]
       tsx scripts/demo.ts [options]

The seed's page-view experiment: two sample-app instances behind a round-robin load balancer, N
concurrent GET /vN/pview per version, then the counter is compared with the number of requests.
v1 (no lock) and v2 (in-process lock) lose updates; v3, v4 and v5 (distributed locks) must not.

Redis comes from the environment (REDIS_DEPLOY_TYPE, REDIS_URL, REDIS_REPLICAS, REDIS_SENTINELS,
REDIS_SENTINEL_MASTER, REDIS_NODES; REDLOCK_NODES for v4's five masters). When none is configured or
the configured one does not answer PING, a local one is started on the dev ports (7400-7449) and
stopped at the end:
  npm run demo                                  local single Redis
  REDIS_DEPLOY_TYPE=cluster npm run demo        local 3+3 cluster (also master-slave, sentinel)

options:
  --requests N           requests per version (default ${DEFAULT_REQUESTS})
  --concurrency C        requests in flight at once (default ${DEFAULT_CONCURRENCY})
  --versions v1,v3,...   versions to run (default all: ${VERSIONS.join(',')})
  --json                 print one JSON object with the results on stdout instead of the table
  --keep                 leave the Redis the demo started running (stop it with npm run redis:down)
  --board                after the runs, keep the apps and Redis up until Ctrl-C, to look at the lock
                         board (http://127.0.0.1:<balancer port>/locks, open it during the runs too)
  --balancer KIND        auto (nginx if on PATH, else built-in; default), nginx or builtin
  --port P               load balancer port (default 3100, or the next free one)
  --app-ports A,B        the two app instances' ports (default 3101,3102, or the next free ones)
  --verbose              stream the app instances' logs to stderr
  --help                 this text

exit code: 0 when v3, v4 and v5 counted exactly every request, 1 otherwise or on errors, 2 on bad usage.`;

export class UsageError extends Error {}

export function parseArgs(argv: readonly string[]): DemoArgs {
  const args: DemoArgs = {
    requests: DEFAULT_REQUESTS,
    concurrency: DEFAULT_CONCURRENCY,
    versions: [...VERSIONS],
    json: false,
    keep: false,
    board: false,
    help: false,
    verbose: false,
    balancer: 'auto',
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const eq = arg.indexOf('=');
    const name = arg.startsWith('--') && eq > 0 ? arg.slice(0, eq) : arg;
    const value = (): string => {
      if (eq > 0 && arg.startsWith('--')) return arg.slice(eq + 1);
      const next = argv[i + 1];
      if (next === undefined || next.startsWith('--')) throw new UsageError(`${name} needs a value`);
      i++;
      return next;
    };
    const noValue = (): void => {
      if (eq > 0 && arg.startsWith('--')) throw new UsageError(`${name} takes no value`);
    };
    switch (name) {
      case '--requests':
        args.requests = integer(name, value(), 1, 1_000_000);
        break;
      case '--concurrency':
        args.concurrency = integer(name, value(), 1, 10_000);
        break;
      case '--versions':
        args.versions = parseVersions(value());
        break;
      case '--balancer': {
        const kind = value();
        if (kind !== 'auto' && kind !== 'nginx' && kind !== 'builtin') {
          throw new UsageError(`--balancer must be auto, nginx or builtin; got ${JSON.stringify(kind)}`);
        }
        args.balancer = kind;
        break;
      }
      case '--port':
        args.port = integer(name, value(), 1, 65_535);
        break;
      case '--app-ports': {
        const raw = value();
        const ports = raw.split(',').map((p) => integer(name, p.trim(), 1, 65_535));
        if (ports.length !== 2 || ports[0] === ports[1]) {
          throw new UsageError(`--app-ports needs two different ports, e.g. 3101,3102; got ${JSON.stringify(raw)}`);
        }
        args.appPorts = [ports[0], ports[1]];
        break;
      }
      case '--json':
      case '--keep':
      case '--board':
      case '--verbose':
      case '--help':
        noValue();
        args[name.slice(2) as 'json' | 'keep' | 'board' | 'verbose' | 'help'] = true;
        break;
      case '-h':
        args.help = true;
        break;
      default:
        throw new UsageError(`unknown argument ${JSON.stringify(arg)}`);
    }
  }
  if (args.port !== undefined && args.appPorts?.includes(args.port)) {
    throw new UsageError(`--port ${args.port} is also one of --app-ports`);
  }
  return args;
}

function integer(name: string, raw: string, min: number, max: number): number {
  const n = Number(raw);
  if (!/^\d+$/.test(raw) || n < min || n > max) {
    throw new UsageError(`${name} needs an integer in ${min}-${max}; got ${JSON.stringify(raw)}`);
  }
  return n;
}

/** "v1,v3" (or "1,3") -> ['v1', 'v3'], deduplicated, in version order. */
export function parseVersions(raw: string): Version[] {
  const wanted = new Set<Version>();
  for (const part of raw.split(',')) {
    const token = part.trim().toLowerCase();
    if (token === '') continue;
    const version = (/^\d$/.test(token) ? `v${token}` : token) as Version;
    if (!VERSIONS.includes(version)) {
      throw new UsageError(
        `unknown version ${JSON.stringify(part.trim())} in --versions (known: ${VERSIONS.join(',')})`,
      );
    }
    wanted.add(version);
  }
  if (wanted.size === 0) throw new UsageError('--versions needs at least one version, e.g. v1,v3');
  return VERSIONS.filter((v) => wanted.has(v));
}

/** One sentence per version, printed under the table. */
export const VERSION_DESCRIPTIONS: Record<Version, string> = {
  v1: 'no lock: each request GETs the counter and SETs it + 1, so concurrent requests overwrite each other.',
  v2: 'an in-process lock serialises requests inside one instance, but the two instances still race each other.',
  v3: '@DistributedLock: a reentrant Redis lock around GET + SET excludes every request of both instances.',
  v4: 'RedLock: the lock is held on a majority (3 of 5) of independent Redis masters before GET + SET.',
  v5: 'a fair Redis lock: waiting requests queue in Redis and get the lock in arrival order.',
};
