import { z } from 'zod';
import { SOURCE_SET_HEADER } from '@svc/shared';

/**
 * Request and response shapes of the inference routes (they generate the OpenAPI document). Known fields
 * are typed; unknown OpenAI-shape fields are kept (`.loose()`) and pass through to the upstream unchanged.
 */
const ModelField = z.string().min(1).max(200).describe('A model id from GET /v1/models.');
const Tokens = z.number().int().min(1).max(10_000_000);

const ChatMessage = z
  .object({
    role: z.string().min(1).max(64),
    content: z.union([z.string(), z.array(z.object({ type: z.string() }).loose()), z.null()]).optional(),
  })
  .loose();

/** The body limit of the inference routes (a batch line holds one such request). */
export const REQUEST_BODY_LIMIT = 16 * 1024 * 1024;

export const ChatBody = z
  .object({
    model: ModelField,
    messages: z.array(ChatMessage).min(1).max(10_000),
    stream: z.boolean().nullable().optional().describe('true: answer with server-sent events; the last event after `data: [DONE]` is `event: receipt`.'),
    stream_options: z.object({ include_usage: z.boolean().optional() }).loose().nullable().optional(),
    max_tokens: Tokens.nullable().optional(),
    max_completion_tokens: Tokens.nullable().optional(),
    n: z.number().int().min(1).max(16).nullable().optional(),
  })
  .loose();

const Usage = z.object({ prompt_tokens: z.number(), completion_tokens: z.number().optional(), total_tokens: z.number() }).loose();

export const ChatCompletion = z
  .object({
    id: z.string(),
    object: z.string(),
    created: z.number(),
    model: z.string(),
    choices: z.array(z.object({ index: z.number(), message: z.object({ role: z.string(), content: z.string().nullable() }).loose(), finish_reason: z.string().nullable() }).loose()),
    usage: Usage.optional(),
  })
  .loose()
  .describe('An OpenAI chat.completion, or with `stream: true` an SSE stream of chat.completion.chunk events.');

export const EmbeddingsBody = z
  .object({
    model: ModelField,
    input: z.union([z.string(), z.array(z.string()).min(1).max(10_000), z.array(z.number().int()).min(1), z.array(z.array(z.number().int())).min(1).max(10_000)]),
    encoding_format: z.enum(['float', 'base64']).optional(),
    dimensions: z.number().int().min(1).optional(),
  })
  .loose();

export const Embeddings = z.object({ object: z.literal('list'), data: z.array(z.object({ object: z.string(), index: z.number(), embedding: z.union([z.array(z.number()), z.string()]) }).loose()), model: z.string(), usage: Usage }).loose();

/** The fields every catalog entry shares (OpenAI's model object). */
export const ModelBase = { id: z.string(), object: z.literal('model'), created: z.number(), owned_by: z.string() };

export const ModelList = z.object({
  object: z.literal('list'),
  data: z.array(
    z.object({
      ...ModelBase,
      pricing: z.object({ input_micro_usd_per_mtok: z.number(), output_micro_usd_per_mtok: z.number() }).optional(),
    }),
  ),
});

const AnthropicBlock = z.object({ type: z.string() }).loose();
export const MessagesBody = z
  .object({
    model: ModelField,
    max_tokens: Tokens,
    messages: z.array(z.object({ role: z.enum(['user', 'assistant']), content: z.union([z.string(), z.array(AnthropicBlock)]) }).loose()).min(1).max(10_000),
    system: z.union([z.string(), z.array(AnthropicBlock)]).optional(),
    stop_sequences: z.array(z.string()).max(16).optional(),
    temperature: z.number().min(0).max(2).optional(),
    top_p: z.number().min(0).max(1).optional(),
    top_k: z.number().int().min(0).optional(),
    stream: z.boolean().optional().describe('true: answer with the Messages event sequence; the last event is `event: receipt`.'),
    tools: z.array(z.object({ name: z.string(), description: z.string().optional(), input_schema: z.record(z.string(), z.unknown()).optional() }).loose()).optional(),
    tool_choice: z.object({ type: z.enum(['auto', 'any', 'tool', 'none']), name: z.string().optional() }).loose().optional(),
    metadata: z.object({ user_id: z.string().nullable().optional() }).loose().optional(),
  })
  .loose();

export const AnthropicMessage = z
  .object({
    id: z.string(),
    type: z.literal('message'),
    role: z.literal('assistant'),
    model: z.string(),
    content: z.array(AnthropicBlock),
    stop_reason: z.string().nullable(),
    stop_sequence: z.string().nullable(),
    usage: z.object({ input_tokens: z.number(), output_tokens: z.number() }).loose(),
  })
  .loose()
  .describe('An Anthropic Message; with `stream: true` an SSE stream of message_start ... message_stop events.');

export const ResponsesBody = z
  .object({
    model: ModelField,
    input: z.union([z.string(), z.array(z.object({}).loose()).min(1).max(10_000)]),
    instructions: z.string().nullable().optional(),
    max_output_tokens: Tokens.nullable().optional(),
    temperature: z.number().min(0).max(2).nullable().optional(),
    top_p: z.number().min(0).max(1).nullable().optional(),
    stream: z.boolean().nullable().optional().describe('true: answer with Responses streaming events; the last event is `event: receipt`.'),
    previous_response_id: z.string().nullable().optional().describe('Refused: this gateway stores no responses.'),
    tools: z.array(z.object({ type: z.string() }).loose()).optional(),
    tool_choice: z.union([z.string(), z.object({ type: z.string() }).loose()]).optional(),
  })
  .loose();

export const ResponseObject = z
  .object({ id: z.string(), object: z.literal('response'), created_at: z.number(), status: z.string(), model: z.string(), output: z.array(z.object({ type: z.string() }).loose()), usage: z.object({}).loose().nullable() })
  .loose()
  .describe('An OpenAI Response; with `stream: true` an SSE stream of response.* events.');

export const RunHeader = z.object({ 'x-svc-run-id': z.string().max(128).optional() });

/** The inference routes' headers: the run, and the source set whose root the receipt cites. */
export const InferenceHeaders = RunHeader.extend({
  [SOURCE_SET_HEADER]: z
    .string()
    .min(1)
    .max(64)
    .optional()
    .describe("A source set of your account (POST /v1/sources/sets) by id: the receipt carries its ordered root as `context.root` (and its id as `context.source_set_id`) in the signed payload. Unknown, taken down or another account's: 404, nothing charged."),
});
