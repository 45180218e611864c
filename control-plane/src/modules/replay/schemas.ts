import { z } from 'zod';
import { ChatBody } from '../inference/schemas.ts';

/** The most capsules an account holds (deleted ones count: their rows stay); the list is complete up to it. */
export const CAPSULES_CAP = 500;
/** The replays a capsule keeps, newest first. */
export const REPLAYS_KEPT = 100;

export const RecordBody = z.strictObject({
  confirm_seal: z
    .literal(true, { error: 'confirm_seal: must be true: the request is sealed at rest and never shown again, not even to you' })
    .describe('Must be true: you confirm the request is sealed and never returned by any route.'),
  key_id: z.string().min(1).max(64).describe('An API key of the account with the inference scope: the recording run and later replays are metered under it.'),
  request: ChatBody.describe('A chat completion request (POST /v1/chat/completions body, without stream); its model may be an engine/<slug> name.'),
});
export type RecordInput = z.infer<typeof RecordBody>;

export const ReplayBody = z
  .strictObject({
    key_id: z.string().min(1).max(64).optional().describe("The API key to meter the replay under; the capsule's key when omitted."),
  })
  .nullish();

export const CapsuleParams = z.object({ id: z.string().min(1).max(64) });

export const ReplayView = z.object({
  id: z.string(),
  object: z.literal('replay'),
  capsule_id: z.string(),
  changed: z.boolean().describe('Whether the output fingerprint differs from the capsule\'s baseline; never what changed.'),
  output_sha256: z.string(),
  baseline_output_sha256: z.string(),
  model: z.string().nullable().describe('The catalog model that served the replay (from its receipt).'),
  key_id: z.string(),
  receipt_id: z.string(),
  cost_micro_usd: z.number().int(),
  created_at: z.string(),
});

export const CapsuleView = z.object({
  id: z.string(),
  object: z.literal('replay.capsule'),
  model: z.string().describe('The model the request names.'),
  key_id: z.string(),
  request_sha256: z.string().describe('Hex sha256 of the request\'s RFC 8785 canonical JSON.'),
  request_destroyed: z.boolean(),
  baseline: z.object({
    output_sha256: z.string().describe('Hex sha256 of the canonical output of the recording run (choices: role, content, refusal, tool calls, finish reason).'),
    receipt_id: z.string(),
    cost_micro_usd: z.number().int(),
  }),
  replay_count: z.number().int(),
  changed_count: z.number().int(),
  last_replayed_at: z.string().nullable(),
  created_at: z.string(),
  deleted_at: z.string().nullable(),
});

export const CapsuleDetail = CapsuleView.extend({ replays: z.array(ReplayView).describe(`Newest first; the newest ${REPLAYS_KEPT} are kept.`) });
export const CapsuleList = z.object({ capsules: z.array(CapsuleView).describe(`Newest first, content-free; complete (at most ${CAPSULES_CAP} per account).`) });
