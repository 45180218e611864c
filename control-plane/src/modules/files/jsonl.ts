import type { z } from 'zod';
import { ServiceError } from '@svc/shared';
import { ChatBody, EmbeddingsBody } from '../inference/schemas.ts';

/** The endpoints a batch line may call. */
export const BATCH_URLS = ['/v1/chat/completions', '/v1/embeddings'] as const;
export type BatchUrl = (typeof BATCH_URLS)[number];

/** One request line of a batch input file (OpenAI's batch input format). */
export interface BatchLine {
  /** 1-based line number in the file. */
  line: number;
  custom_id: string;
  url: BatchUrl;
  body: Record<string, unknown>;
}

const BODY: Record<BatchUrl, z.ZodType> = { '/v1/chat/completions': ChatBody, '/v1/embeddings': EmbeddingsBody };
const KEYS = new Set(['custom_id', 'method', 'url', 'body']);
const MAX_CUSTOM_ID = 512;

const lineError = (line: number, why: string) => new ServiceError('invalid_request', `file: line ${line}: ${why}`, { param: 'file', line });

function issuePath(path: PropertyKey[]): string {
  return path.map((p, i) => (typeof p === 'number' ? `[${p}]` : i === 0 ? String(p) : `.${String(p)}`)).join('');
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function checkLine(raw: string, line: number): BatchLine {
  let v: unknown;
  try {
    v = JSON.parse(raw);
  } catch (e) {
    throw lineError(line, `not valid JSON (${(e as Error).message})`);
  }
  if (!v || typeof v !== 'object' || Array.isArray(v)) throw lineError(line, 'must be a JSON object {custom_id, method, url, body}');
  const o = v as Record<string, unknown>;
  const extra = Object.keys(o).find((k) => !KEYS.has(k));
  if (extra) throw lineError(line, `unknown field "${extra}" (a line holds custom_id, method, url and body)`);
  if (typeof o.custom_id !== 'string' || o.custom_id.length === 0 || o.custom_id.length > MAX_CUSTOM_ID) {
    throw lineError(line, `custom_id must be a string of 1 to ${MAX_CUSTOM_ID} characters`);
  }
  // Stored as text and given back in the output file: a NUL is not storable, and a lone surrogate would come
  // back as U+FFFD, no longer matching the input's.
  if (o.custom_id.includes('\0') || LONE_SURROGATE.test(o.custom_id)) {
    throw lineError(line, 'custom_id must not contain a NUL character or an unpaired surrogate');
  }
  if (o.method !== 'POST') throw lineError(line, 'method must be "POST"');
  if (typeof o.url !== 'string' || !(BATCH_URLS as readonly string[]).includes(o.url)) throw lineError(line, `url must be one of ${BATCH_URLS.join(', ')}`);
  const url = o.url as BatchUrl;
  if (!o.body || typeof o.body !== 'object' || Array.isArray(o.body)) throw lineError(line, 'body must be a JSON object (the request body)');
  const body = o.body as Record<string, unknown>;
  const r = BODY[url].safeParse(body);
  if (!r.success) {
    const i = r.error.issues[0]!;
    throw lineError(line, `body.${issuePath(i.path)}: ${i.message}`);
  }
  if (body.stream === true) throw lineError(line, 'body.stream: batch lines do not stream; leave stream unset');
  return { line, custom_id: o.custom_id, url, body };
}

/**
 * Parses and checks a batch input file: UTF-8 JSONL, one request per line, custom_id unique, at most
 * `maxLines` lines. A problem is a 400 naming the file and the line. A trailing newline is allowed.
 */
export function parseBatchInput(content: Uint8Array, maxLines: number): BatchLine[] {
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(content);
  } catch {
    throw new ServiceError('invalid_request', 'file: not UTF-8 text (a batch input file is JSONL)', { param: 'file' });
  }
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  const rows = text.split('\n');
  if (rows.at(-1) === '') rows.pop();
  if (rows.length === 0) throw new ServiceError('invalid_request', 'file: empty; a batch input file holds one JSON request per line', { param: 'file' });
  if (rows.length > maxLines) throw new ServiceError('invalid_request', `file: ${rows.length} lines; a batch input file holds at most ${maxLines}`, { param: 'file' });
  const seen = new Map<string, number>();
  return rows.map((row, i) => {
    const raw = row.endsWith('\r') ? row.slice(0, -1) : row;
    if (raw.trim() === '') throw lineError(i + 1, 'empty line');
    const l = checkLine(raw, i + 1);
    const first = seen.get(l.custom_id);
    if (first !== undefined) throw lineError(l.line, `custom_id "${l.custom_id}" repeats line ${first}; each custom_id must be unique`);
    seen.set(l.custom_id, l.line);
    return l;
  });
}
