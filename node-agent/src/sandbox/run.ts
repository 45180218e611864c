import { RunJob, type ExecResult } from '@svc/shared';
import type { JobHandler } from '../jobs/types.ts';
import type { Box, SandboxDocker } from './docker.ts';
import { decodeFile, writeFiles } from './files.ts';
import type { WarmPool } from './pool.ts';
import { envList, programArgv } from './program.ts';
import { runInRunner } from './runner.ts';
import { writeTmp } from './tmp.ts';

/**
 * `sandbox.run`: one program in a fresh container, destroyed after. Without network it takes a warm box
 * from the pool (cold path on a miss); with network, or on a miss, it creates one. The program is started
 * by the box's main process (runner.ts; no `docker exec`), and the whole box is killed at the wall-clock
 * limit or on cancel, with everything the program started. A cancelled run still reports what ran.
 */
export function runHandler(sd: SandboxDocker, pool: WarmPool | undefined): JobHandler {
  return async (payload, ctx) => {
    const job = RunJob.parse(payload);
    const files = job.files.map((f) => decodeFile(f.path, f.content_b64));
    const env = envList(job.env);
    pool?.runStarted();
    let box: Box | undefined;
    try {
      const b = (box =
        (!job.network && (await pool?.take(job.limits))) || (await sd.createBox({ kind: 'run', mode: 'runner', owner: ctx.jobId, network: job.network, limits: job.limits })));
      await writeFiles(b, files);
      const argv = await programArgv(job, (path, content) => writeTmp(b, path, content));
      const outcome = await runInRunner(sd, b, {
        argv,
        env,
        stdin: job.stdin,
        timeoutMs: job.timeout_ms,
        outputBytes: job.limits.output_bytes,
        emit: ctx.emit,
        signal: ctx.signal,
        kill: () => sd.killBox(b),
      });
      // A cancelled run reports what ran until it was stopped (`canceled` set): its caller is charged for that.
      const result: ExecResult = { ...outcome, image_digest: b.imageId };
      return { result };
    } finally {
      // Removed by the pool in the next gap between runs (at once without a pool).
      if (pool) pool.runEnded(box);
      else if (box) {
        const name = box.name;
        void sd.destroyBox(box).catch((e: unknown) => sd.log(`sandbox: removing ${name} failed (the reaper will): ${(e as Error).message}`));
      }
    }
  };
}
