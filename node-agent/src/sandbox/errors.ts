import { SANDBOX_ERRORS } from '@svc/shared';

/**
 * A sandbox job failure whose message starts with one of the protocol's error words (`sandbox_not_found`,
 * `sandbox_bad_path`, `sandbox_too_large`), so the control plane maps it to a clear status.
 */
export class SandboxError extends Error {
  constructor(
    readonly type: (typeof SANDBOX_ERRORS)[keyof typeof SANDBOX_ERRORS],
    detail: string,
  ) {
    super(`${type}: ${detail}`);
  }
}

export const notFound = (detail: string) => new SandboxError(SANDBOX_ERRORS.notFound, detail);
export const badPath = (detail: string) => new SandboxError(SANDBOX_ERRORS.badPath, detail);
export const tooLarge = (detail: string) => new SandboxError(SANDBOX_ERRORS.tooLarge, detail);

/** Docker's HTTP status on a failed call, if any (dockerode sets `statusCode`). */
export function dockerStatus(e: unknown): number | undefined {
  return (e as { statusCode?: number }).statusCode;
}

/** Runs a Docker call whose 404 (already gone) or 409 (already being removed) is success. */
export async function ignoreGone(p: Promise<unknown>): Promise<void> {
  try {
    await p;
  } catch (e) {
    const s = dockerStatus(e);
    if (s !== 404 && s !== 409 && s !== 304) throw e;
  }
}
