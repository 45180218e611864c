import { estimateTokens } from '@svc/shared';
import type { ModelPrice } from '../../config.ts';

/**
 * Token counts and prices. Prices are integer micro-USD per million tokens; a charge is
 * ceil((input × input price + output × output price) / 1e6) micro-USD, computed exactly in BigInt.
 *
 * Two local counts over the text a request carries (message roles, names and contents, tool-call arguments,
 * tool definitions as JSON; an image part counts IMAGE_TOKENS):
 * - the estimate (`estimate*`, ~4 characters per token, rounded up) is what a call is charged when its
 *   upstream reports no usage;
 * - the bound (`bound*`) is what the hold assumes: the UTF-8 bytes of that text plus a chat-template margin
 *   per message. Byte-level tokenizers (BPE as in GPT and Llama 3, SentencePiece with byte fallback) never
 *   make more tokens than bytes, so the real prompt count stays under the hold and is charged in full. The
 *   estimate would not: CJK text, code or a byte-level vocabulary run at one token per byte or more.
 */
export const IMAGE_TOKENS = 1_500;

export function costMicroUsd(price: Pick<ModelPrice, 'inputMicroUsdPerMtok' | 'outputMicroUsdPerMtok'>, inputTokens: number, outputTokens: number): number {
  const total = BigInt(inputTokens) * BigInt(price.inputMicroUsdPerMtok) + BigInt(outputTokens) * BigInt(price.outputMicroUsdPerMtok);
  return Number((total + 999_999n) / 1_000_000n);
}

function contentText(content: unknown): { text: string; images: number } {
  if (typeof content === 'string') return { text: content, images: 0 };
  if (!Array.isArray(content)) return { text: '', images: 0 };
  let text = '';
  let images = 0;
  for (const part of content as Array<Record<string, unknown>>) {
    if (!part || typeof part !== 'object') continue;
    if (typeof part.text === 'string') text += part.text;
    else if (part.type === 'image_url' || part.type === 'input_audio' || part.type === 'file') images++;
    else text += JSON.stringify(part);
  }
  return { text, images };
}

/** Tokens a chat template may add around each message (role markers, separators), and around the prompt. */
export const TEMPLATE_TOKENS_PER_MESSAGE = 8;
export const TEMPLATE_TOKENS_PER_PROMPT = 16;

type ChatInput = { messages?: unknown; tools?: unknown; functions?: unknown; response_format?: unknown };

/** Estimated prompt tokens of an OpenAI chat request. */
export function estimateChatInput(body: ChatInput): number {
  const c = chatText(body);
  return estimateTokens(c.text) + c.images * IMAGE_TOKENS;
}

/** The most prompt tokens an OpenAI chat request can make on a byte-level tokenizer (what the hold assumes). */
export function boundChatInput(body: ChatInput): number {
  const c = chatText(body);
  return Buffer.byteLength(c.text, 'utf8') + c.images * IMAGE_TOKENS + c.messages * TEMPLATE_TOKENS_PER_MESSAGE + TEMPLATE_TOKENS_PER_PROMPT;
}

function chatText(body: ChatInput): { text: string; images: number; messages: number } {
  let text = '';
  let messages = 0;
  let images = 0;
  for (const m of Array.isArray(body.messages) ? (body.messages as Array<Record<string, unknown>>) : []) {
    if (!m || typeof m !== 'object') continue;
    messages++;
    text += `${String(m.role ?? '')}: `;
    if (typeof m.name === 'string') text += m.name;
    const c = contentText(m.content);
    text += c.text;
    images += c.images;
    if (Array.isArray(m.tool_calls)) text += JSON.stringify(m.tool_calls);
    text += '\n';
  }
  for (const extra of [body.tools, body.functions, body.response_format]) if (extra) text += JSON.stringify(extra);
  return { text, images, messages };
}

/** Estimated tokens of an embeddings `input` (a string, strings, or token arrays counted exactly). */
export function estimateEmbeddingInput(input: unknown): number {
  return embeddingTokens(input, estimateTokens);
}

/** The most tokens an embeddings `input` can make on a byte-level tokenizer (what the hold assumes). */
export function boundEmbeddingInput(input: unknown): number {
  return embeddingTokens(input, (s) => Buffer.byteLength(s, 'utf8') + 2);
}

function embeddingTokens(input: unknown, text: (s: string) => number): number {
  if (typeof input === 'string') return text(input);
  if (!Array.isArray(input)) return 0;
  if (input.every((x) => typeof x === 'number')) return input.length;
  let n = 0;
  for (const x of input) n += typeof x === 'string' ? text(x) : Array.isArray(x) ? x.length : 0;
  return n;
}
