/**
 * Everything the demo starts registers how to stop it here, at the moment it is started. `run()`
 * stops them in reverse order (load balancer, then apps, then Redis), once, whoever asks first: the
 * normal end, an error, or a SIGINT / SIGTERM handler. `runSync()` is the last resort for
 * `process.on('exit')`: it only signals what has not been stopped yet.
 */
export interface CleanupStep {
  name: string;
  /** Adjacent steps of the same group (the app instances) are stopped concurrently. */
  group?: string;
  stop: () => Promise<void>;
  /** Fire-and-forget variant for the 'exit' event (no awaiting possible there). */
  stopSync?: () => void;
  done: boolean;
}

export class Cleanup {
  private readonly steps: CleanupStep[] = [];
  private running?: Promise<void>;

  constructor(private readonly log: (line: string) => void) {}

  add(name: string, stop: () => Promise<void>, opts: { stopSync?: () => void; group?: string } = {}): void {
    if (this.running) {
      // Started while we are already shutting down (a start that was in flight): stop it right away.
      void stop().catch((err: unknown) => this.log(`cleanup of ${name} failed: ${message(err)}`));
      return;
    }
    this.steps.push({ name, stop, stopSync: opts.stopSync, group: opts.group, done: false });
  }

  /** Stop everything, last started first; never rejects. The same promise for every caller. */
  run(): Promise<void> {
    this.running ??= (async () => {
      const steps = [...this.steps].reverse();
      while (steps.length > 0) {
        const first = steps.shift()!;
        const batch = [first];
        while (first.group !== undefined && steps[0]?.group === first.group) batch.push(steps.shift()!);
        await Promise.all(batch.map((step) => this.stopStep(step)));
      }
    })();
    return this.running;
  }

  private async stopStep(step: CleanupStep): Promise<void> {
    try {
      await step.stop();
    } catch (err) {
      this.log(`cleanup of ${step.name} failed: ${message(err)}`);
    } finally {
      step.done = true;
    }
  }

  runSync(): void {
    for (const step of [...this.steps].reverse()) {
      if (step.done) continue;
      step.done = true;
      try {
        step.stopSync?.();
      } catch {
        // exiting anyway
      }
    }
  }
}

export function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
