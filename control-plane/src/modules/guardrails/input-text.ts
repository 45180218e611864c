/**
 * The texts a caller sends, in each inference shape, rewritten in place: what input rules scan and redact
 * before anything else reads the body (the upstream gets the rewritten text). Images, tool definitions, tool
 * call arguments the caller echoes back, ids and roles are not text a person wrote and are left alone.
 */
export type Endpoint = 'chat.completions' | 'messages' | 'responses' | 'embeddings';
export type Rewrite = (text: string) => string;

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

function field(o: Obj, k: string, f: Rewrite): void {
  const v = o[k];
  if (typeof v === 'string' && v) {
    const w = f(v);
    if (w !== v) o[k] = w;
  }
}

/** A string, or an array of parts whose `text` (parts of the given types) is text. */
function content(o: Obj, k: string, f: Rewrite, partTypes: readonly string[]): void {
  const v = o[k];
  if (typeof v === 'string') return field(o, k, f);
  if (!Array.isArray(v)) return;
  for (const part of v) if (isObj(part) && partTypes.includes(String(part.type))) field(part, 'text', f);
}

export function rewriteInput(endpoint: Endpoint, body: unknown, f: Rewrite): void {
  if (!isObj(body)) return;
  switch (endpoint) {
    case 'chat.completions':
      for (const m of Array.isArray(body.messages) ? body.messages : []) if (isObj(m)) content(m, 'content', f, ['text']);
      return;
    case 'messages':
      content(body, 'system', f, ['text']);
      for (const m of Array.isArray(body.messages) ? body.messages : []) {
        if (!isObj(m)) continue;
        if (typeof m.content === 'string') {
          field(m, 'content', f);
          continue;
        }
        for (const b of Array.isArray(m.content) ? m.content : []) {
          if (!isObj(b)) continue;
          if (b.type === 'text') field(b, 'text', f);
          else if (b.type === 'tool_result') content(b, 'content', f, ['text']);
          else if (b.type === 'document' && isObj(b.source) && b.source.type === 'text') field(b.source, 'data', f);
        }
      }
      return;
    case 'responses':
      field(body, 'instructions', f);
      if (typeof body.input === 'string') return field(body, 'input', f);
      for (const it of Array.isArray(body.input) ? body.input : []) {
        if (!isObj(it)) continue;
        if ((it.type ?? 'message') === 'message') content(it, 'content', f, ['input_text', 'output_text', 'text']);
        else if (it.type === 'function_call_output') field(it, 'output', f);
      }
      return;
    case 'embeddings':
      if (typeof body.input === 'string') return field(body, 'input', f);
      if (Array.isArray(body.input)) body.input.forEach((x, i, a) => typeof x === 'string' && x && (a[i] = f(x)));
      return;
  }
}

/** The output texts of a chat completion's choices (what output rules scan in a non-streamed answer). */
export const OUTPUT_FIELDS = ['content', 'refusal', 'reasoning_content', 'reasoning'] as const;
