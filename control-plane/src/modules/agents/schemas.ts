import { z } from 'zod';
import { LANGUAGES, SCOPE_NAMES } from '@svc/shared';
import { utf8Text, withoutNul } from '../../http/fields.ts';
import { RunResult } from '../sandboxes/schemas.ts';
import { MAX_SECRET_LENGTH } from './hooks.ts';
import { MAX_MESSAGE_BYTES } from './mailbox.ts';
import { MIN_SCHEDULE_INTERVAL_SECONDS } from './scheduler.ts';
import { DEFAULT_AGENT_CAP_MICRO_USD, DEFAULT_MAX_RUNS_PER_HOUR, DEFAULT_TIMEOUT_SECONDS, MAX_CODE_BYTES, MAX_RUNS_PER_HOUR_LIMIT } from './service.ts';

const MAX_CAP = 1_000_000_000_000_000; // $1e9 in micro-USD, as on keys

export const IdParams = z.object({ id: z.string().max(64) });
export const RunParams = z.object({ id: z.string().max(64), run_id: z.string().max(64) });

const MaxRuns = z.number().int().min(1).max(MAX_RUNS_PER_HOUR_LIMIT);

export const DeployBody = z
  .object({
    name: z.string().trim().min(1).max(100),
    language: z.enum(LANGUAGES).describe('The sandbox language the code runs in.'),
    code: withoutNul(utf8Text(MAX_CODE_BYTES, z.string().min(1))).describe(`The program, at most ${MAX_CODE_BYTES} bytes of UTF-8 (413 above); sealed at rest, never returned.`),
    schedule: z
      .string()
      .trim()
      .min(1)
      .max(200)
      .nullable()
      .optional()
      .describe(`A cron expression in UTC (5 fields, or 6 with seconds; @hourly and the like), at most once every ${MIN_SCHEDULE_INTERVAL_SECONDS} s.`),
    spend_cap_micro_usd: z.number().int().min(0).max(MAX_CAP).optional().describe(`Lifetime spend cap of the agent's key; default ${DEFAULT_AGENT_CAP_MICRO_USD} (or, with parent_key_id, what the parent has left).`),
    parent_key_id: z.string().max(64).optional().describe('Mint the agent key as a delegated child of this API key of the account (its scopes and cap bound it).'),
    scopes: z.array(z.enum(SCOPE_NAMES)).max(SCOPE_NAMES.length).optional().describe('Scopes of the agent key; default every scope but billing and keys:delegate.'),
    timeout_seconds: z.number().int().min(1).max(3600).optional().describe(`Each run's time limit; default ${DEFAULT_TIMEOUT_SECONDS}.`),
    network: z.boolean().optional().describe('Network access for runs, where the deployment allows sandboxes any.'),
    mailbox: z.boolean().optional().describe('A message to the agent starts a run (default false).'),
    max_runs_per_hour: MaxRuns.optional().describe(`Runs of every trigger in any hour; default ${DEFAULT_MAX_RUNS_PER_HOUR}.`),
    enabled: z.boolean().optional(),
  })
  .strict();

export const AgentView = z.object({
  id: z.string(),
  object: z.literal('agent'),
  name: z.string(),
  language: z.string(),
  code_sha256: z.string(),
  code_bytes: z.number().int(),
  enabled: z.boolean(),
  schedule: z.string().nullable(),
  next_run_at: z.string().nullable(),
  timeout_seconds: z.number().int(),
  network: z.boolean(),
  triggers: z.object({
    mailbox: z.boolean(),
    max_runs_per_hour: z.number().int(),
    hook: z.object({ enabled: z.boolean(), created_at: z.string().nullable(), signed: z.boolean().describe('An HMAC secret is set: calls must be signed.') }),
  }),
  key: z.object({
    id: z.string(),
    prefix: z.string().nullable(),
    status: z.string(),
    scopes: z.array(z.string()),
    spend_cap_micro_usd: z.number().nullable(),
    spent_micro_usd: z.number(),
  }).describe('The agent key (its secret is never shown; runs receive it as SVC_API_KEY).'),
  run_count: z.number().int(),
  last_run: z.object({ id: z.string(), at: z.string().nullable(), status: z.string().nullable() }).nullable(),
  created_at: z.string(),
});

export const RunView = z.object({
  id: z.string(),
  object: z.literal('agent.run'),
  agent_id: z.string(),
  trigger: z.enum(['manual', 'schedule', 'mailbox', 'hook']),
  status: z.enum(['queued', 'running', 'succeeded', 'failed', 'refused']),
  cost_micro_usd: z.number().nullable(),
  exit_code: z.number().nullable(),
  duration_ms: z.number().nullable(),
  input_bytes: z.number().int(),
  error: z.object({ type: z.string(), message: z.string() }).nullable().describe('Why the run was refused or failed before or around its program (spend_cap_reached, agent_disabled, timed_out, interrupted, ...).'),
  request_id: z.string().describe("The sandbox run's request id: its usage event and sandbox run record."),
  receipt: z
    .object({ id: z.string(), hash: z.string(), signature: z.string(), signer: z.string(), canonical: z.string(), payload: z.record(z.string(), z.unknown()) })
    .nullable()
    .describe('The signed receipt of the sandbox run (verify with POST /v1/receipts/verify).'),
  created_at: z.string(),
  started_at: z.string().nullable(),
  ended_at: z.string().nullable(),
});

export const TriggerBody = z.object({ input: withoutNul(utf8Text(MAX_MESSAGE_BYTES)).optional().describe(`SVC_INPUT of the run, at most ${MAX_MESSAGE_BYTES} bytes of UTF-8 (413 above).`) }).strict();
export const TriggerResult = RunResult.extend({ agent_id: z.string(), run_id: z.string() });

export const GateBody = z.object({ enabled: z.boolean() }).strict();
export const TriggersBody = z
  .object({ mailbox: z.boolean().optional(), max_runs_per_hour: MaxRuns.optional() })
  .strict()
  .refine((b) => b.mailbox !== undefined || b.max_runs_per_hour !== undefined, { message: 'give mailbox, max_runs_per_hour or both' });

export const HookRotated = z.object({
  agent_id: z.string(),
  object: z.literal('agent.hook'),
  url: z.string().describe('The hook URL with its token; shown this once, stored only as sha256. The previous URL stopped working.'),
  created_at: z.string(),
  signed: z.boolean(),
});
export const HookDisabled = z.object({ agent_id: z.string(), object: z.literal('agent.hook'), enabled: z.literal(false), signed: z.boolean() });
export const SecretBody = z
  .object({ secret: z.string().min(16).max(MAX_SECRET_LENGTH).nullable().describe('The HMAC secret (at least 16 characters); null clears it. Sealed, never returned.') })
  .strict();
export const SecretResult = z.object({ agent_id: z.string(), object: z.literal('agent.hook_secret'), signed: z.boolean() });
export const HookAccepted = z.object({ object: z.literal('agent.run'), agent_id: z.string(), run_id: z.string(), status: z.literal('queued'), created_at: z.string() });

export const MessageBody = z
  .object({
    content: withoutNul(utf8Text(MAX_MESSAGE_BYTES)).optional().describe(`At most ${MAX_MESSAGE_BYTES} bytes of UTF-8 (413 above).`),
    body: withoutNul(utf8Text(MAX_MESSAGE_BYTES)).optional().describe('Another name for content.'),
    from_agent_id: z.string().max(64).optional().describe("The sending agent, one of the account's; default the agent whose key sends, if any."),
  })
  .strict();
export const MessageDelivered = z.object({
  id: z.string(),
  object: z.literal('agent.message'),
  agent_id: z.string(),
  from_agent_id: z.string().nullable(),
  bytes: z.number().int(),
  created_at: z.string(),
  run_id: z.string().nullable().describe('The run the message started (mailbox trigger on), queued for the leader.'),
  run_skipped: z.object({ type: z.string(), message: z.string() }).nullable().describe('Why no run started although the mailbox trigger is on (agent_disabled, max_runs_per_hour, spend_cap_reached).'),
});
const flag = z.enum(['true', 'false']).transform((v) => v === 'true');
export const MessagesQuery = z.object({ consume: flag.optional(), unread_only: flag.optional() }).strict();
export const MessagesList = z.object({
  agent_id: z.string(),
  messages: z.array(
    z.object({
      id: z.string(),
      object: z.literal('agent.message'),
      from_agent_id: z.string().nullable(),
      content: z.string(),
      bytes: z.number().int(),
      run_id: z.string().nullable(),
      created_at: z.string(),
      read_at: z.string().nullable(),
    }),
  ),
  unread: z.number().int().describe('Unread messages left in the mailbox.'),
});
