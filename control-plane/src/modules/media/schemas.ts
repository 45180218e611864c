import { z } from 'zod';
import { ModelBase } from '../inference/schemas.ts';

const Size = z.string().max(32).describe('WIDTHxHEIGHT, one of the model\'s sizes');
const Json = z.record(z.string(), z.unknown());

export const ImageModelList = z.object({
  object: z.literal('list'),
  data: z.array(
    z.object({
      ...ModelBase,
      pricing: z.object({ per_image_micro_usd: z.number(), per_size_micro_usd: z.record(z.string(), z.number()) }),
      sizes: z.array(z.string()),
      default_size: z.string(),
      max_n: z.number(),
    }),
  ),
});

export const VideoModelList = z.object({
  object: z.literal('list'),
  data: z.array(
    z.object({
      ...ModelBase,
      pricing: z.object({ per_second_micro_usd: z.number() }),
      max_seconds: z.number(),
      seconds: z.array(z.number()).nullable().describe('Accepted durations; null: any whole number up to max_seconds'),
      default_seconds: z.number(),
      resolutions: z.array(z.string()),
      default_resolution: z.string(),
      aspect_ratios: z.array(z.string()),
    }),
  ),
});

export const ImageBody = z.object({
  model: z.string().min(1).max(200),
  prompt: z.string().min(1).max(32_000),
  n: z.number().int().min(1).max(10).optional(),
  size: Size.optional(),
  response_format: z.enum(['b64_json', 'url']).optional().describe('b64_json (the default); url is refused: no image is stored'),
  quality: z.string().max(32).optional(),
  style: z.string().max(32).optional(),
  background: z.string().max(32).optional(),
  user: z.string().max(256).optional(),
});

const Provenance = z.object({
  manifest: Json.describe('Signed provenance manifest (RFC 8785 canonical JSON is what is signed)'),
  signature: z.string().describe('EIP-191 personal_sign signature of the canonical manifest'),
  embedded: z.boolean().describe('True when the manifest is also inside the PNG (iTXt chunk svc-provenance)'),
});

export const ImagesResponse = z.object({
  created: z.number(),
  size: z.string(),
  data: z.array(z.object({ b64_json: z.string(), revised_prompt: z.string().optional(), provenance: Provenance })),
});

export const VerifyBody = z.object({
  asset_b64: z.string().optional().describe('The asset, base64 (a data: URL is accepted)'),
  asset_sha256: z
    .string()
    .regex(/^[0-9a-fA-F]{64}$/, 'must be a sha256 in hex (64 digits)')
    .optional()
    .describe('Instead of asset_b64: the sha256 of the asset as its manifest covers it (a video: of the file as downloaded), for an asset too large to send'),
  manifest: z.union([Json, z.string()]).optional().describe('A manifest kept beside the asset (object or JSON text); default: the one embedded in a PNG'),
  signature: z.string().max(200).optional().describe('Signature of a supplied manifest'),
});

export const VerifyResult = z.object({
  manifest_found: z.boolean(),
  manifest_source: z.enum(['embedded', 'supplied']).nullable(),
  signature_valid: z.boolean().describe('The signature recovers to the signer the manifest names'),
  hash_matches: z.boolean().describe("The asset's sha256 (PNG: without its provenance chunk) equals the manifest's asset_sha256"),
  signer: z.string().nullable().describe('Recovered signer address'),
  signer_is_gateway: z.boolean(),
  gateway_signer: z.string(),
  asset_sha256: z.string().nullable(),
  manifest: Json.nullable(),
  verified: z.boolean().describe('manifest_found, signature_valid, hash_matches and signer_is_gateway together'),
  reasons: z.array(z.string()),
});

export const VideoBody = z.object({
  model: z.string().min(1).max(200),
  prompt: z.string().min(1).max(32_000),
  seconds: z.union([z.number().int(), z.string().regex(/^\d{1,4}$/, 'must be a whole number of seconds')]).optional(),
  size: Size.optional(),
  aspect_ratio: z.string().regex(/^\d{1,5}:\d{1,5}$/, 'must be W:H, e.g. 16:9').optional(),
  image: z
    .string()
    .max(16 * 1024 * 1024)
    .regex(/^(data:image\/(png|jpeg|webp);base64,[A-Za-z0-9+/=]+|https?:\/\/\S+)$/, 'must be a data:image/(png|jpeg|webp);base64 URL or an http(s) URL')
    .optional()
    .describe('Image-to-video: the first frame as a data: URL or an http(s) URL'),
});

export const VideoJob = z.object({
  id: z.string(),
  object: z.literal('video.generation'),
  model: z.string(),
  status: z.enum(['queued', 'running', 'succeeded', 'failed', 'canceled', 'expired']),
  progress: z.number().int().min(0).max(100),
  seconds: z.number(),
  size: z.string(),
  image_input: z.boolean(),
  created_at: z.string(),
  completed_at: z.string().nullable(),
  expires_at: z.string().nullable(),
  asset_available: z.boolean(),
  content_destroyed_at: z.string().nullable(),
  content_bytes: z.number().nullable(),
  duration_seconds: z.number().nullable(),
  reserved_micro_usd: z.number().describe('Held at creation: the model\'s maximum duration at its per-second price'),
  cost_micro_usd: z.number().nullable().describe('Settled cost; null while the render runs'),
  billed: z.boolean(),
  error: z.object({ type: z.string(), message: z.string() }).nullable(),
  receipt: z
    .object({ id: z.string(), payload: Json, canonical: z.string(), hash: z.string(), signature: z.string(), signer: z.string() })
    .nullable(),
  manifest: Json.nullable(),
  manifest_signature: z.string().nullable(),
});

export const VideoList = z.object({ object: z.literal('list'), data: z.array(VideoJob) });
export const ListQuery = z.object({ limit: z.coerce.number().int().min(1).max(200).default(50) });
export const JobId = z.object({ id: z.string().max(64) });

export const AssistantBody = z.object({
  messages: z
    .array(z.object({ role: z.enum(['user', 'assistant']), content: z.string().min(1).max(8_000) }))
    .min(1)
    .max(32),
  max_tokens: z.number().int().min(1).max(100_000).optional(),
});

export const AssistantReply = z.object({
  object: z.literal('assistant.reply'),
  model: z.string(),
  message: z.object({ role: z.literal('assistant'), content: z.string() }),
  finish_reason: z.string().nullable(),
});
