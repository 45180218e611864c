import { canonicalize, sha256Hex } from '@svc/shared';

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * The canonical output of a chat completion: per choice (by index) its finish reason and message (role,
 * content, refusal, tool calls as type, name and arguments). What varies between calls of the same answer
 * (ids, timestamps, usage, the system fingerprint, tool call ids) is left out.
 */
export function canonicalOutput(body: Obj): Obj {
  const choices = (Array.isArray(body.choices) ? body.choices : []).filter(isObj).map((c) => {
    const m = isObj(c.message) ? c.message : {};
    const message: Obj = { content: m.content ?? null, role: typeof m.role === 'string' ? m.role : 'assistant' };
    if (typeof m.refusal === 'string') message.refusal = m.refusal;
    if (Array.isArray(m.tool_calls)) {
      message.tool_calls = m.tool_calls.filter(isObj).map((t) => {
        const f = isObj(t.function) ? t.function : {};
        return { function: { arguments: f.arguments ?? null, name: f.name ?? null }, type: t.type ?? 'function' };
      });
    }
    return { finish_reason: c.finish_reason ?? null, index: typeof c.index === 'number' ? c.index : 0, message };
  });
  choices.sort((a, b) => a.index - b.index);
  return { choices };
}

/** The output fingerprint: hex sha256 of the canonical output's RFC 8785 JSON. */
export const outputFingerprint = (body: Obj): string => sha256Hex(canonicalize(canonicalOutput(body)));

/** The request fingerprint: hex sha256 of the request's RFC 8785 JSON. */
export const requestFingerprint = (request: Obj): string => sha256Hex(canonicalize(request));
