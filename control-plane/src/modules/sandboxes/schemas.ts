import { z } from 'zod';
import { LANGUAGES } from '@svc/shared';
import { withoutNul } from '../../http/fields.ts';

/** Request and response shapes of the sandbox routes (they generate the OpenAPI document). */
const EnvVars = z
  .record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'environment variable names are letters, digits and _').max(128), withoutNul(z.string().max(32768)))
  .refine((e) => Object.keys(e).length <= 64, 'at most 64 environment variables')
  .describe('Environment variables for the program.');

export const Program = {
  language: z.enum(LANGUAGES).default('sh').describe('sh, python (python3) or node. Ignored when `command` is given.'),
  code: withoutNul(z.string().max(1024 * 1024)).optional().describe('Source to run in `language`.'),
  command: z.array(withoutNul(z.string().max(65536))).min(1).max(256).optional().describe('An argv to run instead of `code`.'),
  stdin: z.string().max(8 * 1024 * 1024).optional(),
  env: EnvVars.optional(),
  timeout_seconds: z.number().int().min(1).max(3600).optional().describe('Wall-clock limit; the run is killed at it. Default 30.'),
  stream: z.boolean().optional().describe('true: answer with server-sent events (stdout, stderr, result, receipt).'),
};

export const RunBody = z
  .object({
    ...Program,
    files: z
      .array(z.object({ path: withoutNul(z.string().min(1).max(4096)), content: z.string().optional(), content_base64: z.string().optional() }).strict())
      .max(100)
      .optional()
      .describe('Files written into /workspace before the program runs (UTF-8 `content` or `content_base64`).'),
    network: z.boolean().optional().describe('Network access; off by default and only where the deployment allows it.'),
  })
  .strict()
  .refine((b) => b.code !== undefined || b.command !== undefined, { message: 'give `code` or `command`', path: ['code'] });

export const ExecBody = z
  .object(Program)
  .strict()
  .refine((b) => b.code !== undefined || b.command !== undefined, { message: 'give `code` or `command`', path: ['code'] });

export const SessionBody = z
  .object({
    env: EnvVars.optional(),
    network: z.boolean().optional(),
    idle_timeout_seconds: z.number().int().min(10).max(86400).optional().describe('The session stops after this long without an exec. Default 600.'),
    snapshot_id: z.string().max(64).optional().describe('Start from a snapshot: the session runs on the node that holds it.'),
  })
  .strict();

export const RunResult = z.object({
  id: z.string(),
  object: z.enum(['sandbox.run', 'sandbox.exec']),
  status: z.enum(['succeeded', 'failed', 'timed_out', 'canceled']).describe('canceled: its caller left a streamed run or exec, which was stopped and charged for the seconds it ran.'),
  exit_code: z.number().nullable(),
  stdout: z.string(),
  stderr: z.string(),
  stdout_truncated: z.boolean(),
  stderr_truncated: z.boolean(),
  timed_out: z.boolean(),
  oom_killed: z.boolean(),
  duration_ms: z.number(),
  cost_micro_usd: z.number(),
  node_id: z.string(),
  session_id: z.string().nullable(),
  image_digest: z.string(),
  receipt: z.object({ id: z.string(), hash: z.string(), signature: z.string(), signer: z.string(), payload: z.record(z.string(), z.unknown()) }),
  replayed: z.boolean().optional().describe('An Idempotency-Key replay: the first result, without its output (output is never stored).'),
});
export type RunResult = z.infer<typeof RunResult>;

export const SessionView = z.object({
  id: z.string(),
  object: z.literal('sandbox.session'),
  status: z
    .enum(['starting', 'running', 'stopped', 'failed', 'node_offline', 'lost'])
    .describe('node_offline: its node is not reachable now (it may come back); lost: its node no longer holds its container (final, like stopped: no exec, no metering, stopped_at says when it was found lost).'),
  node_id: z.string().nullable(),
  network: z.boolean(),
  alive_seconds: z.number(),
  exec_count: z.number(),
  cost_micro_usd: z.number(),
  idle_timeout_seconds: z.number(),
  snapshot_id: z.string().nullable(),
  image_digest: z.string().nullable(),
  created_at: z.string(),
  last_active_at: z.string(),
  stopped_at: z.string().nullable(),
});

export const SnapshotView = z.object({
  id: z.string(),
  object: z.literal('sandbox.snapshot'),
  session_id: z.string(),
  node_id: z.string(),
  bytes: z.number(),
  sha256: z.string(),
  created_at: z.string(),
});

export const RunHistory = z.object({
  id: z.string(),
  object: z.literal('sandbox.run_record'),
  session_id: z.string().nullable(),
  node_id: z.string().nullable(),
  language: z.string(),
  network: z.boolean(),
  status: z.string(),
  exit_code: z.number().nullable(),
  timed_out: z.boolean(),
  oom_killed: z.boolean(),
  duration_ms: z.number().nullable(),
  stdout_bytes: z.number().nullable(),
  stderr_bytes: z.number().nullable(),
  cost_micro_usd: z.number(),
  image_digest: z.string().nullable(),
  receipt_id: z.string().nullable(),
  created_at: z.string(),
});
