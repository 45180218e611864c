/** Why the process is not ready (shown in the 503 of `/readyz`), or null when it is. */
export type ReadinessCheck = () => string | null | Promise<string | null>;

/**
 * What `GET /readyz` answers: ready once every registered condition holds. A process with none (tests, a
 * gateway without a local node agent) is ready as soon as it answers. `npm start` registers the local node
 * agent's connection while it starts one, and a stopping process registers its stop.
 */
export class Readiness {
  private readonly checks = new Map<string, ReadinessCheck>();

  /** Adds (or replaces) the condition `name`. */
  require(name: string, check: ReadinessCheck): void {
    this.checks.set(name, check);
  }

  /** Drops the condition `name` (met for good, or no longer relevant). */
  release(name: string): void {
    this.checks.delete(name);
  }

  /** The first unmet condition's reason, or null when ready. A check that fails counts as unmet. */
  async unmet(): Promise<string | null> {
    for (const [name, check] of this.checks) {
      let why: string | null;
      try {
        why = await check();
      } catch {
        why = `${name} could not be checked`;
      }
      if (why) return why;
    }
    return null;
  }
}
