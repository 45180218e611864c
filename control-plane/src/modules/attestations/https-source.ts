import type { Clock } from '@svc/shared';
import { invalid } from '@svc/shared';
import { UpstreamFailure, assertDialable, dial, readAll } from '../mcp/upstream.ts';
import { normalize, DECIMAL_PATTERN } from '../nav/decimal.ts';
import type { SelfAddress } from '../webhooks/url.ts';
import { sha256Hex0x } from '@svc/shared';
import { MAX_BODY_BYTES, type Exchange } from './rpc.ts';

/** An HTTPS source of one figure: the JSON document at `url` and the figure at `json_pointer` (RFC 6901). */
export interface FigureSource {
  url: string;
  json_pointer: string;
}

export interface HttpsSourceDeps {
  self: SelfAddress;
  clock: Clock;
  timeoutMs: number;
  /** SVC_ASSET_HTTPS_SOURCES: off, every HTTPS source is unavailable (unconfigured). */
  enabled: boolean;
}

export interface FigureReading {
  exchange: Exchange;
  /** The figure as a shortest decimal string; null when none was read. */
  value: string | null;
}

/**
 * Checks a source URL at submission: https (http only where private addresses are allowed, for local
 * sources), no credentials, not this gateway, not a private address unless allowed. A bad URL is a 400
 * naming `param`; nothing is read or written.
 */
export function checkSourceUrl(raw: string, self: SelfAddress, param: string): string {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw invalid(`${param}: must be an absolute https URL`, param);
  }
  if (u.protocol !== 'https:' && !(u.protocol === 'http:' && self.allowPrivate)) throw invalid(`${param}: must be an https URL`, param);
  if (u.username || u.password) throw invalid(`${param}: must not carry credentials`, param);
  try {
    assertDialable(u, self);
  } catch (e) {
    throw invalid(`${param}: ${(e as Error).message}`, param);
  }
  return u.toString();
}

/** RFC 6901: the value at `pointer` in `doc`, or undefined. */
export function atPointer(doc: unknown, pointer: string): unknown {
  if (pointer === '') return doc;
  if (!pointer.startsWith('/')) return undefined;
  let cur: unknown = doc;
  for (const raw of pointer.slice(1).split('/')) {
    const key = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    if (Array.isArray(cur) && /^(0|[1-9]\d*)$/.test(key)) cur = cur[Number(key)];
    else if (cur && typeof cur === 'object' && Object.hasOwn(cur, key)) cur = (cur as Record<string, unknown>)[key];
    else return undefined;
  }
  return cur;
}

/**
 * A figure as an exact decimal string: a string of decimal digits, or a JSON number small enough that
 * JSON.parse kept it exactly (at most 15 significant digits, no exponent); anything else is refused.
 */
export function figureOf(v: unknown): string | null {
  if (typeof v === 'string') return DECIMAL_PATTERN.test(v.trim()) ? normalize(v.trim()) : null;
  if (typeof v !== 'number' || !Number.isFinite(v)) return null;
  const text = String(v);
  if (/e/i.test(text) || text.replace(/^-/, '').replace('.', '').replace(/^0+/, '').length > 15) return null;
  return normalize(text);
}

/** Reads one figure; never throws: an unreachable, refused, unconfigured or malformed source comes back with `error`. */
export async function readFigure(src: FigureSource, d: HttpsSourceDeps): Promise<FigureReading> {
  const read_at = d.clock.now();
  const request = `GET ${src.url}`;
  if (!d.enabled) return { exchange: { request, body: null, sha256: null, read_at, error: 'HTTPS sources are not configured on this gateway (SVC_ASSET_HTTPS_SOURCES=false)' }, value: null };
  const signal = AbortSignal.timeout(d.timeoutMs);
  let body: Buffer;
  let status: number;
  try {
    const res = await dial(new URL(src.url), { method: 'GET', headers: { accept: 'application/json' }, signal }, d.self);
    status = res.statusCode ?? 0;
    body = await readAll(res, MAX_BODY_BYTES, signal);
  } catch (e) {
    const msg = e instanceof UpstreamFailure ? e.message : 'the source could not be reached';
    return { exchange: { request, body: null, sha256: null, read_at, error: msg }, value: null };
  }
  const exchange: Exchange = { request, body, sha256: sha256Hex0x(body), read_at, error: null };
  if (status !== 200) return { exchange: { ...exchange, error: `the source answered HTTP ${status}` }, value: null };
  let doc: unknown;
  try {
    doc = JSON.parse(body.toString('utf8'));
  } catch {
    return { exchange: { ...exchange, error: 'the source answered something that is not JSON' }, value: null };
  }
  const value = figureOf(atPointer(doc, src.json_pointer));
  if (value === null) return { exchange: { ...exchange, error: `no exact decimal figure at ${src.json_pointer || '(the document)'}` }, value: null };
  return { exchange, value };
}
