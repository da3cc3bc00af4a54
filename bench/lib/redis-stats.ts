import type Redis from 'ioredis';

/**
 * Counts what an ioredis connection sends: `requests` are round trips the caller waits for (a
 * standalone command, or a whole pipeline), `commands` every command including pipelined ones.
 */
export interface CommandCounter {
  requests: number;
  commands: number;
  pipelines: number;
}

type SendCommand = Redis['sendCommand'];

/** Wraps `redis.sendCommand` on this instance only; returns the live counter. */
export function countCommands(
  redis: Redis,
  counter: CommandCounter = { requests: 0, commands: 0, pipelines: 0 },
): CommandCounter {
  const original: SendCommand = redis.sendCommand.bind(redis);
  const seenPipelines = new WeakSet<object>();
  const wrapped = (...args: Parameters<SendCommand>): ReturnType<SendCommand> => {
    const stream = args[1] as unknown as { isPipeline?: boolean } | undefined;
    counter.commands++;
    if (stream && typeof stream === 'object' && stream.isPipeline) {
      if (!seenPipelines.has(stream)) {
        seenPipelines.add(stream);
        counter.pipelines++;
        counter.requests++;
      }
    } else {
      counter.requests++;
    }
    return original(...args);
  };
  redis.sendCommand = wrapped as SendCommand;
  return counter;
}

export function snapshot(counter: CommandCounter): CommandCounter {
  return { ...counter };
}

export function diff(after: CommandCounter, before: CommandCounter): CommandCounter {
  return {
    requests: after.requests - before.requests,
    commands: after.commands - before.commands,
    pipelines: after.pipelines - before.pipelines,
  };
}

/** `INFO commandstats` as { command: calls }; script-internal calls are included by Redis 7. */
export async function commandStats(redis: Redis): Promise<Map<string, number>> {
  const text = await redis.info('commandstats');
  const calls = new Map<string, number>();
  for (const line of text.split(/\r?\n/)) {
    const match = /^cmdstat_([^:]+):calls=(\d+)/.exec(line);
    if (match) calls.set(match[1], Number(match[2]));
  }
  return calls;
}

/** The bench's own bookkeeping commands, never counted as lock traffic. */
export const BOOKKEEPING_COMMANDS = new Set([
  'info',
  'config|resetstat',
  'config',
  'mget',
  'mset',
  'ping',
  'client|setname',
  'client|info',
]);

/** Sum of calls of every command that is not bookkeeping (the critical section uses only MGET/MSET). */
export function lockCommandCalls(stats: Map<string, number>): { total: number; byCommand: Record<string, number> } {
  let total = 0;
  const byCommand: Record<string, number> = {};
  for (const [name, calls] of stats) {
    if (BOOKKEEPING_COMMANDS.has(name)) continue;
    total += calls;
    byCommand[name] = calls;
  }
  return { total, byCommand };
}

/** Redis server CPU (user + sys seconds) from INFO cpu. */
export async function serverCpuSeconds(redis: Redis): Promise<number> {
  const text = await redis.info('cpu');
  const field = (name: string): number => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(text)?.[1] ?? NaN);
  return field('used_cpu_user') + field('used_cpu_sys');
}
