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
  /**
   * The job was cancelled while the program ran (its caller left): the program was stopped, and the figures are
   * of what ran until then. Absent when the program ended by itself or at its time limit.
   */
  canceled: z.string().max(2000).optional(),
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

/**
 * An interactive terminal in a session (`sandbox.session.terminal`): a shell under a TTY in the session's
 * container, for as long as the caller keeps it open (at most `max_ms`). Its screen streams back as `stdout`
 * outputs; `data` outputs carry TerminalEvent JSON (ready, then the acknowledgements of its input). Input comes
 * as job input (InputMessage) of TerminalInput.
 */
export const TerminalJob = z.object({
  session_id: z.string(),
  cols: z.number().int().min(1).max(1000),
  rows: z.number().int().min(1).max(1000),
  /** The terminal's wall-clock limit: killed at it, reported `timed_out`. */
  max_ms: z.number().int().min(1000).max(24 * 3600_000),
  /** The most terminals the session may have open at once, this one included (refused `sandbox_busy` above). */
  max_terminals: z.number().int().min(1).max(64),
  env: z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/).max(128), z.string().max(32768)).default({}),
});
export type TerminalJob = z.infer<typeof TerminalJob>;

/**
 * Signals a terminal takes: INT, QUIT and TSTP as the terminal's own control characters (^C, ^\, ^Z: the
 * foreground program gets them as from a keyboard), HUP, TERM and KILL sent to the terminal's shell and its
 * process group.
 */
export const TERMINAL_SIGNALS = ['INT', 'QUIT', 'TSTP', 'HUP', 'TERM', 'KILL'] as const;
export type TerminalSignal = (typeof TERMINAL_SIGNALS)[number];
/** The most bytes of keystrokes one input carries (larger ones are split), and the most unacknowledged input on its way. */
export const TERMINAL_INPUT_CHUNK = 16 * 1024;
export const TERMINAL_INPUT_WINDOW = 64 * 1024;

export const TerminalInput = z.discriminatedUnion('type', [
  z.object({ type: z.literal('data'), data_b64: z.string().max(Math.ceil(TERMINAL_INPUT_CHUNK / 3) * 4) }),
  z.object({ type: z.literal('resize'), cols: z.number().int().min(1).max(1000), rows: z.number().int().min(1).max(1000) }),
  z.object({ type: z.literal('signal'), name: z.enum(TERMINAL_SIGNALS) }),
  /** The caller is gone (`closed`) or was idle too long (`idle`): the terminal's processes are killed and it ends. */
  z.object({ type: z.literal('close'), reason: z.enum(['closed', 'idle']) }),
]);
export type TerminalInput = z.infer<typeof TerminalInput>;

/** A terminal job's `data` outputs: `ready` once its shell runs, `ack` for its input consumed up to `seq`. */
export const TerminalEvent = z.discriminatedUnion('type', [z.object({ type: z.literal('ready') }), z.object({ type: z.literal('ack'), seq: z.number().int().min(0) })]);
export type TerminalEvent = z.infer<typeof TerminalEvent>;

/** How a terminal ended: its shell exited, its caller closed it, idle, or killed at its wall-clock limit. */
export const TERMINAL_END_REASONS = ['exited', 'closed', 'idle', 'timed_out'] as const;
export const TerminalResult = ExecResult.extend({ reason: z.enum(TERMINAL_END_REASONS) });
export type TerminalResult = z.infer<typeof TerminalResult>;

export const SANDBOX_JOBS = {
  run: 'sandbox.run',
  sessionCreate: 'sandbox.session.create',
  sessionExec: 'sandbox.session.exec',
  sessionStop: 'sandbox.session.stop',
  sessionTerminal: 'sandbox.session.terminal',
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
  busy: 'sandbox_busy', // a session at its limit of open terminals
} as const;
