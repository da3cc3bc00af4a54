/**
 * Where the refused votes of one RedLock wait registered its process (each master's waiting registry,
 * see redlock-grant-3.lua), known once its votes have answered: a vote still on its way when the round
 * was decided may be a refusal that registers it after the wait has ended.
 */
export class WaitRegistrations {
  /** Masters whose last answered vote of the wait was a refusal (made at the first: most waits have none). */
  private masters?: Set<number>;
  private unanswered = 0;
  private onAnswered?: () => void;

  /** A vote of the wait was sent. */
  sent(): void {
    this.unanswered++;
  }

  /**
   * A vote on master `index` answered: `refused` (its process is registered there), granted (a grant
   * takes it out, or to the back behind its other waiters), or undefined when its outcome is unknown.
   */
  answered(index: number, refused: boolean | undefined): void {
    if (refused === true) (this.masters ??= new Set()).add(index);
    else if (refused === false) this.masters?.delete(index);
    if (--this.unanswered > 0 || !this.onAnswered) return;
    const then = this.onAnswered;
    this.onAnswered = undefined;
    then();
  }

  /** `leave` with the masters where the process is registered, once every vote sent has answered; not at all when none. */
  whenAnswered(leave: (masters: ReadonlySet<number>) => void): void {
    const then = (): void => {
      if (this.masters && this.masters.size > 0) leave(this.masters);
    };
    if (this.unanswered > 0) this.onAnswered = then;
    else then();
  }
}
