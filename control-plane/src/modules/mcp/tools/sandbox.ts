import { z } from 'zod';
import { LANGUAGES, MAX_FILE_BYTES, SANDBOX_JOBS, ServiceError } from '@svc/shared';
import { withoutNul } from '../../../http/fields.ts';
import type { SandboxDeps } from '../../sandboxes/deps.ts';
import { SandboxSessions } from '../../sandboxes/sessions.ts';
import type { McpTool, ToolAnswer } from './registry.ts';

const RunInput = z.object({
  language: z.enum(LANGUAGES).default('sh').describe('sh, python (python3) or node.'),
  code: withoutNul(z.string().min(1).max(1024 * 1024)).describe('Source to run in `language`.'),
  stdin: z.string().max(1024 * 1024).optional(),
  timeout_seconds: z.number().int().min(1).max(3600).optional().describe('Wall-clock limit; the run is killed at it. Default 30.'),
  files: z
    .array(z.object({ path: withoutNul(z.string().min(1).max(4096)), content: z.string() }))
    .max(100)
    .optional()
    .describe('UTF-8 files written into /workspace before the program runs.'),
});

/**
 * Run code once in a fresh sandbox (no network), through the same metered executor as POST /v1/sandboxes:
 * held for the time limit, settled per second, receipted (exit code, duration, image digest; never output).
 * With a progressToken, stdout and stderr stream as progress notifications while it runs.
 */
export function sandboxTool(d: SandboxDeps): McpTool<typeof RunInput> {
  return {
    name: 'run_code',
    title: 'Run code in a sandbox',
    description: 'Run sh, Python or Node code once in a fresh sandbox without network. Metered per second under your key; the signed receipt\'s id is in the result\'s _meta.',
    inputSchema: RunInput,
    annotations: { readOnlyHint: false, destructiveHint: false, openWorldHint: false },
    streams: true,
    scope: 'sandboxes',
    route: { method: 'POST', url: '/v1/sandboxes' },
    async run(args, ctx): Promise<ToolAnswer> {
      const files = (args.files ?? []).map((f, i) => {
        const bytes = Buffer.from(f.content, 'utf8');
        if (bytes.length > MAX_FILE_BYTES) throw new ServiceError('payload_too_large', `files[${i}]: workspace files are limited to ${MAX_FILE_BYTES} bytes`);
        const path = SandboxSessions.checkPath(f.path);
        if (!path) throw new ServiceError('invalid_request', `files[${i}].path: name a file`, { param: `files[${i}].path` });
        return { path, content_b64: bytes.toString('base64') };
      });
      const program = { language: args.language, code: args.code, stdin: args.stdin, timeout_seconds: args.timeout_seconds };
      const timeoutS = d.executor.timeoutSeconds(program);
      const progress = ctx.progress;
      const out = { stdout: '', stderr: '' };
      const { result: r, receipt } = await d.executor.execute(
        ctx.principal,
        program,
        { kind: 'run', jobKind: SANDBOX_JOBS.run, payload: { ...d.executor.programPayload(program, timeoutS), files, network: false, limits: d.config.limits }, sessionId: null, network: false },
        {
          requestId: ctx.requestId,
          runId: ctx.runId,
          resource: ctx.resource,
          route: ctx.route,
          signal: ctx.signal,
          onOutput: (o) => {
            if (o.stream !== 'stdout' && o.stream !== 'stderr') return;
            out[o.stream] += o.data;
            progress?.(o.data);
          },
        },
      );
      const { stdout, stderr } = out;
      const text = stdout + (stderr ? `${stdout && !stdout.endsWith('\n') ? '\n' : ''}[stderr]\n${stderr}` : '');
      return {
        content: [{ type: 'text', text: text || `(no output; exit code ${r.exit_code})` }],
        structuredContent: {
          status: r.status,
          exit_code: r.exit_code,
          stdout,
          stderr,
          stdout_truncated: r.stdout_truncated,
          stderr_truncated: r.stderr_truncated,
          timed_out: r.timed_out,
          oom_killed: r.oom_killed,
          duration_ms: r.duration_ms,
          cost_micro_usd: r.cost_micro_usd,
        },
        isError: r.status !== 'succeeded',
        receipt,
      };
    },
  };
}
