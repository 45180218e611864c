import { estimateTokens } from '@svc/shared';
import type { ModelPrice } from '../../config.ts';

/**
 * Token counts and prices. Prices are integer micro-USD per million tokens; a charge is
 * ceil((input × input price + output × output price) / 1e6) micro-USD, computed exactly in BigInt.
 *
 * Local estimation (the hold, and streams whose upstream reports no usage): ~4 characters per token,
 * rounded up (`estimateTokens`), over the text a request or answer carries: message contents and names,
 * tool-call arguments, tool definitions as JSON; an image part counts IMAGE_TOKENS.
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

/** Estimated prompt tokens of an OpenAI chat request. */
export function estimateChatInput(body: { messages?: unknown; tools?: unknown; functions?: unknown; response_format?: unknown }): number {
  let text = '';
  let images = 0;
  for (const m of Array.isArray(body.messages) ? (body.messages as Array<Record<string, unknown>>) : []) {
    if (!m || typeof m !== 'object') continue;
    text += `${String(m.role ?? '')}: `;
    if (typeof m.name === 'string') text += m.name;
    const c = contentText(m.content);
    text += c.text;
    images += c.images;
    if (Array.isArray(m.tool_calls)) text += JSON.stringify(m.tool_calls);
    text += '\n';
  }
  for (const extra of [body.tools, body.functions, body.response_format]) if (extra) text += JSON.stringify(extra);
  return estimateTokens(text) + images * IMAGE_TOKENS;
}

/** Estimated tokens of an embeddings `input` (a string, strings, or token arrays counted exactly). */
export function estimateEmbeddingInput(input: unknown): number {
  if (typeof input === 'string') return estimateTokens(input);
  if (!Array.isArray(input)) return 0;
  if (input.every((x) => typeof x === 'number')) return input.length;
  let n = 0;
  for (const x of input) n += typeof x === 'string' ? estimateTokens(x) : Array.isArray(x) ? x.length : 0;
  return n;
}
