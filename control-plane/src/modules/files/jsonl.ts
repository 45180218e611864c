import type { z } from 'zod';
import { ServiceError } from '@svc/shared';
import { MAX_JSON_DEPTH, nestsDeeper } from '../../http/body.ts';
import { ChatBody, EmbeddingsBody, REQUEST_BODY_LIMIT } from '../inference/schemas.ts';

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
  if (nestsDeeper(v)) throw lineError(line, `nests deeper than ${MAX_JSON_DEPTH} levels of objects and arrays`);
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

const fileError = (why: string) => new ServiceError('invalid_request', `file: ${why}`, { param: 'file' });
const NEWLINE = 0x0a;
const BOM = Buffer.from([0xef, 0xbb, 0xbf]);
/** Bytes a line may have: one request at the live routes' body limit, and its custom_id, method and url. */
export const MAX_LINE_BYTES = REQUEST_BODY_LIMIT + 4096;

/**
 * Checks a batch input file as its bytes arrive: UTF-8 JSONL, one request per line, custom_id unique, at most
 * `maxLines` lines, a trailing newline allowed, a leading byte order mark skipped. Each line is decoded and
 * checked on its own once its newline (or the end) is seen, so neither the file as text nor its parsed
 * lines are ever whole in memory unless the caller keeps them (`onLine`), and a line longer than
 * `maxLineBytes` is refused as it arrives. A problem is a 400 naming the file and the line. No UTF-8 sequence
 * holds a 0x0A byte, so cutting at newlines cuts no character.
 */
export class BatchInputCheck {
  // ignoreBOM: a byte order mark is skipped at the start of the file only, not at the start of each line.
  private readonly decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
  private readonly seen = new Map<string, number>();
  private readonly urls = new Set<BatchUrl>();
  /** Bytes of the line not yet ended, kept by reference. */
  private partial: Buffer[] = [];
  private partialBytes = 0;
  private started = false;
  /** Lines checked so far. */
  lines = 0;

  constructor(
    private readonly maxLines: number,
    private readonly onLine?: (l: BatchLine) => void,
    private readonly maxLineBytes = MAX_LINE_BYTES,
  ) {}

  push(bytes: Uint8Array): void {
    let buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    if (!this.started) {
      // The byte order mark may come split over the first pushes: wait for three bytes (or the end).
      const head = Buffer.concat([...this.partial, buf]);
      if (head.length < BOM.length && BOM.subarray(0, head.length).equals(head)) return void (this.partial = [head]);
      this.started = true;
      this.partial = [];
      buf = head.subarray(0, BOM.length).equals(BOM) ? head.subarray(BOM.length) : head;
    }
    let from = 0;
    for (let nl = buf.indexOf(NEWLINE); nl >= 0; nl = buf.indexOf(NEWLINE, from)) {
      this.grow(nl - from);
      const row = this.partial.length ? Buffer.concat([...this.partial, buf.subarray(from, nl)]) : buf.subarray(from, nl);
      this.partial = [];
      this.partialBytes = 0;
      this.line(row);
      from = nl + 1;
    }
    if (from < buf.length) {
      this.grow(buf.length - from);
      this.partial.push(buf.subarray(from));
    }
  }

  /** The line being read grows by `n` bytes: refused once past the limit, before it is kept. */
  private grow(n: number): void {
    this.partialBytes += n;
    if (this.partialBytes > this.maxLineBytes) throw lineError(this.lines + 1, `longer than ${this.maxLineBytes} bytes; a line holds one request, at most ${REQUEST_BODY_LIMIT} bytes as on the live routes`);
  }

  /** The end of the file: checks its last line (one without a newline) and returns what the file holds. */
  end(): { lines: number; endpoints: BatchUrl[] } {
    const rest = Buffer.concat(this.partial);
    this.partial = [];
    if (rest.length > 0) this.line(rest);
    if (this.lines === 0) throw fileError('empty; a batch input file holds one JSON request per line');
    return { lines: this.lines, endpoints: [...this.urls] };
  }

  private line(row: Buffer): void {
    const n = ++this.lines;
    if (n > this.maxLines) throw fileError(`more than ${this.maxLines} lines; a batch input file holds at most ${this.maxLines}`);
    let raw: string;
    try {
      raw = this.decoder.decode(row);
    } catch {
      throw lineError(n, 'not UTF-8 text (a batch input file is JSONL)');
    }
    if (raw.endsWith('\r')) raw = raw.slice(0, -1);
    if (raw.trim() === '') throw lineError(n, 'empty line');
    const l = checkLine(raw, n);
    const first = this.seen.get(l.custom_id);
    if (first !== undefined) throw lineError(n, `custom_id "${l.custom_id}" repeats line ${first}; each custom_id must be unique`);
    this.seen.set(l.custom_id, n);
    this.urls.add(l.url);
    this.onLine?.(l);
  }
}

/** Parses and checks a whole batch input file (see BatchInputCheck), keeping its lines. */
export function parseBatchInput(content: Uint8Array, maxLines: number, maxLineBytes = MAX_LINE_BYTES): BatchLine[] {
  const lines: BatchLine[] = [];
  const check = new BatchInputCheck(maxLines, (l) => lines.push(l), maxLineBytes);
  check.push(content);
  check.end();
  return lines;
}
