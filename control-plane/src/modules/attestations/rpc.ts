import { sha256Hex0x, type Clock } from '@svc/shared';

/** The most bytes one source answer may hold (a contract's code is at most 24 KiB, 49 KiB as hex). */
export const MAX_BODY_BYTES = 512 * 1024;

/**
 * One exchange with a source, as kept for evidence: the exact request, the exact bytes answered, their
 * sha256 and when they were read. `error` says why nothing usable was read (transport, status, size, not
 * JSON); the bytes are kept whenever some arrived.
 */
export interface Exchange {
  request: string;
  body: Buffer | null;
  sha256: string | null;
  read_at: Date;
  error: string | null;
}


/** Reads a response body, at most `max` bytes. */
export async function readCapped(res: Response, max: number): Promise<Buffer> {
  const declared = Number(res.headers.get('content-length') ?? NaN);
  if (declared > max) throw new Error(`the answer is ${declared} bytes, more than ${max}`);
  const chunks: Buffer[] = [];
  let n = 0;
  if (!res.body) return Buffer.alloc(0);
  for await (const c of res.body as unknown as AsyncIterable<Uint8Array>) {
    n += c.length;
    if (n > max) throw new Error(`the answer is more than ${max} bytes`);
    chunks.push(Buffer.from(c));
  }
  return Buffer.concat(chunks);
}

/** An answer of a JSON-RPC node: the result, or the node's error object, or nothing usable. */
export interface RpcAnswer {
  exchange: Exchange;
  /** Present when the node answered with a result. */
  result?: unknown;
  /** Present when the node answered with a JSON-RPC error (an eth_call that reverted, say). */
  rpcError?: { code: number; message: string };
}

/**
 * A JSON-RPC client that keeps every byte: each call is one POST whose body is fixed by the method and
 * params (`{"jsonrpc":"2.0","id":1,"method":...,"params":[...]}`), so anyone who sends the same body to a
 * node of the same chain at a pinned block gets the same bytes back and can compare their sha256 with the
 * record's. Failures never throw: they come back as an exchange with `error` set.
 */
export class RawRpc {
  constructor(
    private readonly url: string,
    private readonly clock: Clock,
    private readonly timeoutMs: number,
  ) {}

  static requestBody(method: string, params: unknown[]): string {
    return JSON.stringify({ jsonrpc: '2.0', id: 1, method, params });
  }

  async call(method: string, params: unknown[]): Promise<RpcAnswer> {
    const request = RawRpc.requestBody(method, params);
    const read_at = this.clock.now();
    let body: Buffer;
    try {
      const res = await fetch(this.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: request, signal: AbortSignal.timeout(this.timeoutMs), redirect: 'error' });
      body = await readCapped(res, MAX_BODY_BYTES);
      if (res.status !== 200) return { exchange: { request, body, sha256: sha256Hex0x(body), read_at, error: `the node answered HTTP ${res.status}` } };
    } catch (e) {
      // The node's URL may carry a key: the message names the failure, never the URL.
      const name = (e as Error).name === 'TimeoutError' ? 'timed out' : 'unreachable';
      return { exchange: { request, body: null, sha256: null, read_at, error: `the node of this chain is ${name}` } };
    }
    const exchange: Exchange = { request, body, sha256: sha256Hex0x(body), read_at, error: null };
    let json: { result?: unknown; error?: { code?: unknown; message?: unknown } };
    try {
      json = JSON.parse(body.toString('utf8')) as typeof json;
    } catch {
      return { exchange: { ...exchange, error: 'the node answered something that is not JSON' } };
    }
    if (json && typeof json === 'object' && json.error && typeof json.error === 'object') {
      return { exchange, rpcError: { code: Number(json.error.code ?? 0), message: String(json.error.message ?? '').slice(0, 300) } };
    }
    if (!json || typeof json !== 'object' || !('result' in json)) return { exchange: { ...exchange, error: 'the node answered JSON without a result' } };
    return { exchange, result: json.result };
  }
}
