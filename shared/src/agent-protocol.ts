import { z } from 'zod';

/**
 * The agent channel: the node agent dials the control plane over WebSocket and speaks tRPC with these
 * zod-checked messages. The protocol version is checked on connect; a mismatch is refused with a message
 * the operator can act on.
 */
export const PROTOCOL_VERSION = 1;
export const CHANNEL_PATH = '/v1/nodes/channel';
export const HEARTBEAT_SECONDS = 60;
/** A node silent for this many heartbeat intervals is offline and gets no new work. */
export const OFFLINE_AFTER_MISSED = 3;

export const NODE_KINDS = ['sandbox', 'inference'] as const;
export type NodeKind = (typeof NODE_KINDS)[number];

export const ConnectionParams = z.object({
  node_key: z.string().startsWith('nk-svc_'),
  protocol_version: z.coerce.number().int(),
  agent_version: z.string().max(64),
  /**
   * This connection's number: larger for every later connection of the node's agent (its start time in ms
   * times 1000, plus its connections since). Absent from agents before it; those are recorded unnumbered.
   */
  connection: z.coerce.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional(),
});

export const Capabilities = z
  .object({
    cpu: z.object({ cores: z.number().int().min(0).max(4096), model: z.string().max(200), load: z.number().min(0).max(100_000) }),
    memory: z.object({ total_bytes: z.number().int().min(0), available_bytes: z.number().int().min(0) }),
    disk: z.object({ total_bytes: z.number().int().min(0), available_bytes: z.number().int().min(0) }),
    gpus: z.array(z.object({ model: z.string().max(200), vram_bytes: z.number().int().min(0).nullable() })).max(64),
    docker: z.object({ reachable: z.boolean(), version: z.string().max(64).nullable() }),
    os: z.string().max(200),
  })
  .strict();
export type Capabilities = z.infer<typeof Capabilities>;

export const HeartbeatBody = z
  .object({
    capabilities: Capabilities,
    endpoint: z.string().url().max(500).nullable().optional(),
    load: z.object({ running_jobs: z.number().int().min(0).max(100_000) }).strict(),
    agent_version: z.string().min(1).max(64),
    protocol_version: z.number().int().optional(),
  })
  .strict();
export type HeartbeatBody = z.infer<typeof HeartbeatBody>;

/** A job pushed to an agent. `payload` is checked by the job kind's own schema on the agent. */
export const JobMessage = z.object({
  type: z.literal('job'),
  job_id: z.string(),
  kind: z.string(),
  payload: z.unknown(),
  /** The job's whole-time limit. */
  timeout_ms: z.number().int().positive(),
  /** Also a limit on the time without output (from the start, then between two outputs): a stream's. */
  idle_timeout_ms: z.number().int().positive().optional(),
});
export const CancelMessage = z.object({ type: z.literal('cancel'), job_id: z.string(), reason: z.string() });
/**
 * Input for a running job that takes it (a terminal's keystrokes, resizes, signals), in `seq` order; checked by
 * the job kind's own schema on the agent. An agent acknowledges what it consumed in the job's output (the job
 * kind says how), so the control plane keeps a bounded window of input on its way. Input for a job the agent
 * does not run is dropped; so is input sent while the node's channel is down (the next one's `seq` says so).
 */
export const InputMessage = z.object({ type: z.literal('input'), job_id: z.string(), seq: z.number().int().min(0), input: z.unknown() });
export const ServerMessage = z.discriminatedUnion('type', [JobMessage, CancelMessage, InputMessage]);
export type ServerMessage = z.infer<typeof ServerMessage>;
export type JobMessage = z.infer<typeof JobMessage>;
export type InputMessage = z.infer<typeof InputMessage>;

/** The most characters one job output carries. */
export const MAX_OUTPUT_CHARS = 1024 * 1024;
/**
 * The most bytes one message on the agent channel may take (the control plane's WebSocket maxPayload); a job
 * result must leave room for its envelope.
 */
export const MAX_CHANNEL_MESSAGE_BYTES = 32 * 1024 * 1024;
export const JobOutput = z.object({
  job_id: z.string(),
  seq: z.number().int().min(0),
  stream: z.enum(['stdout', 'stderr', 'data']),
  data: z.string().max(MAX_OUTPUT_CHARS),
});
/** Outputs of one job in seq order, as one message (see the agent's batching). */
export const JobOutputs = z.array(JobOutput).min(1).max(1024);
export const JobFinish = z.object({
  job_id: z.string(),
  ok: z.boolean(),
  result: z.unknown().optional(),
  error: z.string().max(2000).optional(),
  duration_ms: z.number().min(0),
  /** The agent stopped the job at its time limit. */
  timed_out: z.boolean().optional(),
  /** Units of work done (tokens, seconds of CPU...) for the observed-speed check; omitted when meaningless. */
  work_units: z.number().min(0).optional(),
});
export type JobOutput = z.infer<typeof JobOutput>;
export type JobFinish = z.infer<typeof JobFinish>;

export const Hello = z.object({
  running_jobs: z.array(z.string()).max(10_000),
  /**
   * The sandbox sessions the agent holds (their containers live, or being created): the control plane marks
   * the node's other running sessions lost. Absent from agents before it; nothing is marked then.
   */
  sessions: z.array(z.string().max(64)).max(10_000).optional(),
});
