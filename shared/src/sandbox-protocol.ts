import { z } from 'zod';

/**
 * Sandbox jobs the control plane sends to `sandbox` nodes over the agent channel (job kinds below), and
 * what they answer. stdout/stderr stream back as job output chunks (UTF-8 text) and are never stored by
 * the control plane; results carry only metadata.
 */
export const LANGUAGES = ['sh', 'python', 'node'] as const;
export type Language = (typeof LANGUAGES)[number];

export const WORKSPACE = '/workspace';
export const MAX_FILE_BYTES = 8 * 1024 * 1024;

export const Limits = z.object({
  memory_mb: z.number().int().min(16).max(65536),
  cpus: z.number().min(0.05).max(64),
  pids: z.number().int().min(8).max(65536),
  output_bytes: z.number().int().min(1024).max(64 * 1024 * 1024),
});
export type Limits = z.infer<typeof Limits>;

/** A path inside the workspace: relative (or under /workspace), no `..`, no NUL. */
export function workspacePath(p: string): string | null {
  if (p.includes('\0') || p.length === 0 || p.length > 4096) return null;
  const rel = p.startsWith(`${WORKSPACE}/`) ? p.slice(WORKSPACE.length + 1) : p === WORKSPACE ? '' : p;
  if (rel.startsWith('/')) return null;
  const parts = rel.split('/').filter((s) => s !== '' && s !== '.');
  if (parts.some((s) => s === '..')) return null;
  return parts.join('/');
}

const Program = z.object({
  language: z.enum(LANGUAGES),
  code: z.string().max(1024 * 1024).optional(),
  command: z.array(z.string().max(65536)).min(1).max(256).optional(),
  stdin: z.string().max(8 * 1024 * 1024).optional(),
  env: z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/).max(128), z.string().max(32768)).default({}),
  timeout_ms: z.number().int().min(100).max(3_600_000),
});

export const RunJob = Program.extend({
  files: z.array(z.object({ path: z.string(), content_b64: z.string() })).max(1000).default([]),
  network: z.boolean().default(false),
  limits: Limits,
});
export type RunJob = z.infer<typeof RunJob>;

export const ExecResult = z.object({
  exit_code: z.number().int().nullable(),
  timed_out: z.boolean(),
  oom_killed: z.boolean(),
  duration_ms: z.number().min(0),
  stdout_bytes: z.number().int().min(0),
  stderr_bytes: z.number().int().min(0),
  stdout_truncated: z.boolean(),
  stderr_truncated: z.boolean(),
  image_digest: z.string(),
});
export type ExecResult = z.infer<typeof ExecResult>;

export const SessionCreateJob = z.object({
  session_id: z.string(),
  env: z.record(z.string(), z.string()).default({}),
  network: z.boolean().default(false),
  limits: Limits,
  idle_timeout_ms: z.number().int().min(1000),
  snapshot_id: z.string().optional(),
});
export const SessionCreateResult = z.object({ container_id: z.string(), image_digest: z.string() });

export const SessionExecJob = Program.extend({ session_id: z.string(), tty: z.boolean().default(false) });
export const SessionStopJob = z.object({ session_id: z.string() });
export const FileWriteJob = z.object({ session_id: z.string(), path: z.string(), content_b64: z.string() });
export const FileReadJob = z.object({ session_id: z.string(), path: z.string() });
export const FileReadResult = z.object({ content_b64: z.string(), bytes: z.number().int() });
export const FileListJob = z.object({ session_id: z.string(), path: z.string() });
export const FileEntry = z.object({ name: z.string(), type: z.enum(['file', 'dir', 'link', 'other']), size: z.number().int(), mtime: z.string() });
export const FileListResult = z.object({ path: z.string(), entries: z.array(FileEntry) });
export const SnapshotCreateJob = z.object({ session_id: z.string(), snapshot_id: z.string() });
export const SnapshotCreateResult = z.object({ bytes: z.number().int(), sha256: z.string() });
export const SnapshotDeleteJob = z.object({ snapshot_id: z.string() });

export const SANDBOX_JOBS = {
  run: 'sandbox.run',
  sessionCreate: 'sandbox.session.create',
  sessionExec: 'sandbox.session.exec',
  sessionStop: 'sandbox.session.stop',
  fileWrite: 'sandbox.files.write',
  fileRead: 'sandbox.files.read',
  fileList: 'sandbox.files.list',
  snapshotCreate: 'sandbox.snapshot.create',
  snapshotDelete: 'sandbox.snapshot.delete',
} as const;

/** Errors a sandbox job reports in its message, so the control plane maps them to clear statuses. */
export const SANDBOX_ERRORS = {
  notFound: 'sandbox_not_found', // session or file missing
  badPath: 'sandbox_bad_path',
  tooLarge: 'sandbox_too_large',
} as const;
