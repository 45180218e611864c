/** Inputs kept for a job whose handler does not listen yet; more than this is a control plane past its window: dropped. */
const MAX_KEPT = 4096;

/**
 * One running job's input (InputMessage), handed to its handler in the order it came; what came before the
 * handler listened (it starts its program first) is kept until then. A job that never listens drops it.
 */
export class JobInput {
  private kept: Array<{ seq: number; input: unknown }> = [];
  private listener: ((seq: number, input: unknown) => void) | undefined;

  push(seq: number, input: unknown): void {
    if (this.listener) this.listener(seq, input);
    else if (this.kept.length < MAX_KEPT) this.kept.push({ seq, input });
  }

  listen(listener: (seq: number, input: unknown) => void): void {
    this.listener = listener;
    for (const k of this.kept.splice(0)) listener(k.seq, k.input);
  }
}
