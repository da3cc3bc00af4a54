/**
 * A model-based test of every lock kind over real Redis (issue #38): fast-check generates sequences of
 * lock commands from three lock clients (c0 on the application's own ioredis client at its defaults,
 * c1 and c2 from createLockClient), with owners from a small set (explicit ids shared across clients,
 * ids that are prefixes of one another, ids with ':', '{', '}'; a client's lock scope; none) and
 * faults between and inside them. After every step the invariants of invariants.ts are checked
 * against Redis itself: exclusion, belief, no orphan.
 *
 * Each run prints its seed. Replay a whole generation with `MODEL_SEED=<seed> npx jest test/model`,
 * and one failing case (shrunk) with `MODEL_SEED=<seed> MODEL_PATH=<path> npx jest test/model`, both
 * printed on failure. MODEL_COMMANDS (default 1000) sets how many commands a passing run executes at
 * least; MODEL_TIME_LIMIT_MS (default 150000) bounds generation plus shrinking; MODEL_KINDS and
 * MODEL_FAULTS (comma-separated) narrow the lists below (a replay needs the same lists); MODEL_VERBOSE=1
 * prints every step.
 *
 * Runs on a private redis-server, port 7386 (SIGSTOP is one of the faults).
 */
import fc from 'fast-check';
import { ModelRun, ModelStats, ModelViolation } from './model';
import { describeStep, stepArbitrary, type FaultName, type KindName, type Step } from './steps';
import { EXCESS_WITHIN_MS } from './invariants';
import { sleep, World } from './world';

/** The kinds the model exercises (MODEL_KINDS=fair,read narrows them, to look at one kind). */
const KINDS: readonly KindName[] = listFromEnv('MODEL_KINDS', [
  'reentrant',
  'fair',
  'simple',
  'read',
  'write',
  'semaphore',
  'multi',
]);

/**
 * The faults it injects around about one command in four (and alone between commands):
 * - lost-reply: the proxy passes the command to Redis and drops the connection before the reply
 *   reaches the client (c0's ioredis then sends the command again on its new connection);
 * - kill-lock-connection / kill-pubsub-connection: CLIENT KILL of the acting client's connection;
 * - sigstop: Redis frozen for 100-400 ms.
 */
const FAULTS: readonly FaultName[] = listFromEnv('MODEL_FAULTS', [
  'lost-reply',
  'kill-lock-connection',
  'kill-pubsub-connection',
  'sigstop',
]);

const TARGET_COMMANDS = Number(process.env.MODEL_COMMANDS ?? 1_000);
const TIME_LIMIT_MS = Number(process.env.MODEL_TIME_LIMIT_MS ?? 150_000);
const SEED = process.env.MODEL_SEED === undefined ? Date.now() % 2_147_483_647 : Number(process.env.MODEL_SEED);
const PATH = process.env.MODEL_PATH;

const say = (text: string) => process.stdout.write(`${text}\n`);

/** A comma-separated subset of `all` from the environment (unknown names refused), or `all`. */
function listFromEnv<T extends string>(variable: string, all: readonly T[]): readonly T[] {
  const raw = process.env[variable];
  if (raw === undefined) return all;
  const picked = raw.split(',').filter((name) => name !== '') as T[];
  const unknown = picked.filter((name) => !all.includes(name));
  if (unknown.length > 0) throw new Error(`${variable}: unknown ${unknown.join(', ')} (known: ${all.join(', ')})`);
  return picked;
}

describe('lock model over real Redis: three clients, every kind, faults', () => {
  let world: World;

  beforeAll(async () => {
    world = await World.start();
  }, 60_000);
  afterAll(async () => {
    await world?.close();
  });

  it(
    `keeps exclusion, belief and no orphan through ${TARGET_COMMANDS}+ commands`,
    async () => {
      say(
        `lock model: seed ${SEED}${PATH ? `, path ${PATH}` : ''} (replay: MODEL_SEED=${SEED} npx jest test/model); ` +
          `kinds ${KINDS.join(', ')}; faults ${FAULTS.join(', ') || 'none'}`,
      );
      const stats = new ModelStats();
      /** Finished runs whose locks may still hold something: checked until they are empty. */
      const draining: ModelRun[] = [];
      const late: string[] = [];
      let runs = 0;
      let commands = 0;
      let failing = false;

      /** Checks the finished runs' locks: a late orphan is a failure of the run that left it. */
      const checkDraining = async () => {
        for (const run of [...draining]) {
          const snapshot = await run.snapshot();
          const violations = run.evaluate(snapshot);
          if (violations.length > 0) late.push(new ModelViolation(violations, run.trace).message);
          if (run.isDrained(snapshot) || violations.length > 0) draining.splice(draining.indexOf(run), 1);
        }
      };

      const property = fc.asyncProperty(
        fc.array(stepArbitrary(KINDS, FAULTS), { minLength: 1, maxLength: 60, size: 'max' }),
        async (steps: Step[]) => {
          // Enough commands ran, and nothing failed: the remaining runs pass without running.
          if (!failing && commands >= TARGET_COMMANDS) return;
          const run = new ModelRun(world, ++runs, stats);
          try {
            for (const step of steps) {
              await run.execute(step);
              commands++;
              await run.check();
              await checkDraining();
            }
            await run.finish();
            await run.check();
          } catch (error) {
            failing = true;
            throw error;
          } finally {
            await run.finish().catch(() => undefined);
            draining.push(run);
          }
        },
      );
      const details = await fc.check(property, {
        seed: SEED,
        path: PATH,
        numRuns: PATH ? 1 : 10_000,
        interruptAfterTimeLimit: TIME_LIMIT_MS,
        markInterruptAsFailure: false,
      });

      // What earlier runs left in Redis must go within a lease too.
      const drainUntil = Date.now() + EXCESS_WITHIN_MS + 2_000;
      while (draining.length > 0 && Date.now() < drainUntil) {
        await sleep(250);
        await checkDraining();
      }

      say(`lock model: ${commands} commands in ${runs} runs (seed ${SEED})\n${stats}`);
      if (details.failed) {
        const error = details.errorInstance;
        // The steps after the one that broke an invariant never ran: the sequence ends there.
        const executed = error instanceof ModelViolation ? error.executed : Infinity;
        const steps = (details.counterexample?.[0] ?? []).slice(0, executed);
        say(
          `lock model FAILED (seed ${SEED}, path ${details.counterexamplePath}; replay: ` +
            `MODEL_SEED=${SEED} MODEL_PATH=${details.counterexamplePath} npx jest test/model)\n` +
            `shrunk to ${steps.length} steps run (${details.numShrinks} shrinks${details.interrupted ? ', interrupted' : ''}):\n` +
            steps.map((step, i) => `  ${i + 1}. ${describeStep(step)}`).join('\n') +
            `\n${error instanceof Error ? error.message : String(error)}`,
        );
      }
      expect(details.failed ? String(details.errorInstance) : 'no violation').toBe('no violation');
      expect(late).toEqual([]);
      if (!PATH) expect(commands).toBeGreaterThanOrEqual(TARGET_COMMANDS);
    },
    TIME_LIMIT_MS + 60_000,
  );
});
