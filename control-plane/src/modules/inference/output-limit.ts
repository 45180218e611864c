import type { OutputLimitField } from '../../config.ts';

const OTHER: Record<OutputLimitField, OutputLimitField> = { max_tokens: 'max_completion_tokens', max_completion_tokens: 'max_tokens' };

/**
 * A chat request as one upstream gets it: the caller's output bound (`max_completion_tokens`, else
 * `max_tokens`: the one the hold assumed) in the field this upstream reads, and not in the other. OpenAI's
 * reasoning models refuse `max_tokens`; Ollama ignores `max_completion_tokens`, so a bound left in it would
 * let the answer run past what was held. A request without a bound is sent as it is (a bound the caller did
 * not ask for could push a vLLM request past the model's context, which vLLM refuses), and so is every request
 * when `field` is null (a provider configured without one). The same object when nothing moves.
 */
export function withOutputLimit(body: Record<string, unknown>, field: OutputLimitField | null): Record<string, unknown> {
  if (field === null) return body;
  const other = OTHER[field];
  const asked = bound(body.max_completion_tokens) ?? bound(body.max_tokens);
  if (asked === undefined || (body[field] === asked && !(other in body))) return body;
  const out: Record<string, unknown> = { ...body, [field]: asked };
  delete out[other];
  return out;
}

const bound = (v: unknown): number | undefined => (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 ? v : undefined);
