import createClient, { type Client } from 'openapi-fetch';
import { createSiweMessage } from 'viem/siwe';
import { ApiError } from './errors.ts';
import type { paths } from './generated/openapi.ts';
import type {
  Balance,
  BillingMethods,
  ChatCompletionInput,
  Deposit,
  DepositInput,
  KeyInput,
  NodeEnrollInput,
  NodeGate,
  SandboxRunInput,
  UsageEventsQuery,
  WebhookInput,
} from './types.ts';

export { ApiError, isInsufficientCredit, retryAfterSeconds, type ErrorEnvelope, type InsufficientCreditBody, type PaymentTerms, type X402PaymentRequired } from './errors.ts';
export { sseFrames } from './sse.ts';
export type * from './types.ts';

export type Credential = { kind: 'key' | 'session' | 'bearer'; token: string } | undefined;

export interface ClientOptions {
  baseUrl: string;
  /** Sent as Bearer on every request unless a call overrides it. */
  credential?: Credential;
  fetch?: typeof fetch;
}

export interface RequestOptions {
  body?: unknown;
  query?: Record<string, string | number | boolean | undefined>;
  credential?: Credential | null;
  headers?: Record<string, string>;
}

/** Anything that can sign an EIP-191 personal message for an address (a viem account, a local key). */
export interface MessageSigner {
  address: `0x${string}`;
  signMessage(args: { message: string }): Promise<`0x${string}`>;
}

/** The generated client: typed paths, parameters, bodies and responses from the router's OpenAPI document. */
export type ApiClient = Client<paths>;

type Outcome<D> = { data?: D; error?: unknown; response: Response };
type Untyped = (method: string, path: string, init: Record<string, unknown>) => Promise<Outcome<unknown>>;

/** Bodies sent as they are; anything else is JSON. */
function isRawBody(b: unknown): boolean {
  return (
    typeof b === 'string' ||
    b instanceof Uint8Array ||
    b instanceof ArrayBuffer ||
    b instanceof Blob ||
    b instanceof FormData ||
    b instanceof URLSearchParams ||
    b instanceof ReadableStream
  );
}

function serializeBody(body: unknown): RequestInit['body'] {
  return isRawBody(body) ? (body as RequestInit['body']) : JSON.stringify(body);
}

function queryString(query: RequestOptions['query']): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined) q.set(k, String(v));
  return q.toString();
}

/** A request header that asks for no credential at all (sign-in); the middleware removes it before sending. */
const NO_CREDENTIAL = 'x-svc-client-no-credential';

/** An answer the caller reads itself: the request was sent, and openapi-fetch is handed this empty one to parse. */
const HANDED_OVER = () => new Response(null, { status: 204 });

/**
 * Typed client for the gateway's API; the CLI and the tests use it. Every call goes through the generated
 * client (`api`: openapi-fetch over generated/openapi.ts), so paths, bodies and responses are checked against
 * the router's own document. Errors throw ApiError with the gateway's envelope intact. The base URL is the bare
 * origin: paths carry their own /v1.
 */
export class SvcClient {
  readonly baseUrl: string;
  credential: Credential;
  /** The generated client, for any route without a method here; it sends this client's credential. */
  readonly api: ApiClient;
  private readonly fetchImpl: typeof fetch;

  constructor(opts: ClientOptions) {
    this.baseUrl = opts.baseUrl.replace(/\/+$/, '').replace(/\/v1$/, '');
    this.credential = opts.credential;
    this.fetchImpl = opts.fetch ?? ((input, init) => fetch(input, init));
    this.api = createClient<paths>({ baseUrl: this.baseUrl, fetch: (req) => this.fetchImpl(req), bodySerializer: serializeBody });
    // The credential goes on every request that names none itself; `auth(null)` asks for none.
    this.api.use({
      onRequest: ({ request }) => {
        if (request.headers.has(NO_CREDENTIAL)) request.headers.delete(NO_CREDENTIAL);
        else if (this.credential && !request.headers.has('authorization')) request.headers.set('authorization', `Bearer ${this.credential.token}`);
        return undefined;
      },
    });
  }

  withCredential(credential: Credential): SvcClient {
    return new SvcClient({ baseUrl: this.baseUrl, credential, fetch: this.fetchImpl });
  }

  /** Headers for a call that overrides the credential: another one, or none at all (null). */
  auth(override?: Credential | null): Record<string, string> {
    if (override === null) return { [NO_CREDENTIAL]: '1' };
    return override ? { authorization: `Bearer ${override.token}` } : {};
  }

  /** Unwraps a generated call: the data of a 2xx, else ApiError with the envelope as sent. */
  async call<D>(pending: Promise<Outcome<D>>): Promise<D> {
    let out: Outcome<D>;
    try {
      out = await pending;
    } catch (err) {
      if (err instanceof SyntaxError) throw new ApiError(502, { error: { type: 'upstream_error', message: 'gateway sent malformed JSON' } }, new Headers());
      throw err;
    }
    if (!out.response.ok) throw new ApiError(out.response.status, out.error, out.response.headers);
    return out.data as D;
  }

  /** Any method and path (query allowed in it), through the generated client's untyped entry. */
  private send(method: string, path: string, opts: RequestOptions, init: Record<string, unknown>): Promise<Outcome<unknown>> {
    const q = path.indexOf('?');
    const pathname = q < 0 ? path : path.slice(0, q);
    const search = [q < 0 ? '' : path.slice(q + 1), queryString(opts.query)].filter(Boolean).join('&');
    const headers: Record<string, string | null> = { ...this.auth(opts.credential) };
    const given = Object.keys(opts.headers ?? {}).some((h) => h.toLowerCase() === 'content-type');
    // A raw body keeps the content type fetch gives it unless one is named; JSON is declared.
    if (opts.body !== undefined && isRawBody(opts.body) && !given) headers['content-type'] = typeof opts.body === 'string' ? 'text/plain;charset=UTF-8' : null;
    Object.assign(headers, opts.headers);
    const request = this.api.request as unknown as Untyped;
    return request(method, pathname, {
      headers,
      body: opts.body,
      querySerializer: () => search,
      ...(opts.body instanceof ReadableStream ? { duplex: 'half' } : {}),
      ...init,
    });
  }

  /** Sends any request and hands back the Response unread (status, headers, streams): no error is thrown for a 4xx or 5xx. */
  async raw(method: string, path: string, opts: RequestOptions = {}): Promise<Response> {
    let res: Response | undefined;
    await this.send(method, path, opts, {
      fetch: async (req: Request) => {
        res = await this.fetchImpl(req);
        return HANDED_OVER();
      },
    });
    return res!;
  }

  /** Any request; the answer's JSON (text when it is not JSON), or ApiError. */
  async request<T>(method: string, path: string, opts: RequestOptions = {}): Promise<T> {
    const { data, error, response } = await this.send(method, path, opts, { parseAs: 'text' });
    if (!response.ok) throw new ApiError(response.status, error, response.headers);
    const text = typeof data === 'string' ? data : '';
    if (!(response.headers.get('content-type') ?? '').includes('json') || !text) return text as T;
    try {
      return JSON.parse(text) as T;
    } catch {
      throw new ApiError(502, { error: { type: 'upstream_error', message: `gateway sent malformed JSON (HTTP ${response.status})` } }, response.headers);
    }
  }

  // platform
  banner() {
    return this.call(this.api.GET('/'));
  }
  status() {
    return this.call(this.api.GET('/v1/status'));
  }

  // identity
  nonce() {
    return this.call(this.api.POST('/v1/auth/nonce', { headers: this.auth(null) }));
  }
  verify(message: string, signature: string) {
    return this.call(this.api.POST('/v1/auth/verify', { body: { message, signature }, headers: this.auth(null) }));
  }

  /** Builds the EIP-4361 message this gateway expects, for the given nonce. */
  siweMessage(address: `0x${string}`, nonce: string, opts: { chainId?: number; statement?: string; issuedAt?: Date } = {}): string {
    const origin = new URL(this.baseUrl);
    return createSiweMessage({
      domain: origin.host,
      uri: origin.origin,
      address,
      chainId: opts.chainId ?? 1,
      nonce,
      version: '1',
      issuedAt: opts.issuedAt ?? new Date(),
      statement: opts.statement ?? 'Sign in to the gateway.',
    });
  }

  /** Full SIWE sign-in; the returned client carries the session. */
  async signIn(signer: MessageSigner, opts: { chainId?: number; issuedAt?: Date } = {}) {
    const { nonce } = await this.nonce();
    const message = this.siweMessage(signer.address, nonce, opts);
    const signature = await signer.signMessage({ message });
    const session = await this.verify(message, signature);
    return { client: this.withCredential({ kind: 'session', token: session.token }), session };
  }

  me() {
    return this.call(this.api.GET('/v1/auth/me'));
  }
  sessions() {
    return this.call(this.api.GET('/v1/auth/sessions'));
  }
  logout() {
    return this.call(this.api.POST('/v1/auth/logout'));
  }
  logoutAll() {
    return this.call(this.api.POST('/v1/auth/logout-all'));
  }
  wallets() {
    return this.call(this.api.GET('/v1/auth/wallets'));
  }
  async linkWallet(signer: MessageSigner, opts: { chainId?: number; issuedAt?: Date } = {}) {
    const { nonce } = await this.nonce();
    const message = this.siweMessage(signer.address, nonce, { ...opts, statement: 'Link this wallet to my gateway account.' });
    const signature = await signer.signMessage({ message });
    return this.call(this.api.POST('/v1/auth/wallets', { body: { message, signature } }));
  }
  unlinkWallet(address: string) {
    return this.call(this.api.DELETE('/v1/auth/wallets/{addr}', { params: { path: { addr: address } } }));
  }

  // keys
  createKey(input: KeyInput = {}) {
    return this.call(this.api.POST('/v1/keys', { body: input }));
  }
  listKeys() {
    return this.call(this.api.GET('/v1/keys'));
  }
  revokeKey(id: string) {
    return this.call(this.api.DELETE('/v1/keys/{id}', { params: { path: { id } } }));
  }
  rotateKey(id: string, graceSeconds?: number) {
    return this.call(this.api.POST('/v1/keys/{id}/rotate', { params: { path: { id } }, body: graceSeconds === undefined ? {} : { grace_seconds: graceSeconds } }));
  }
  unfreezeKey(id: string) {
    return this.call(this.api.POST('/v1/keys/{id}/unfreeze', { params: { path: { id } } }));
  }
  /** Called with an API key credential: mints a child of that key. */
  delegateKey(input: KeyInput = {}) {
    return this.call(this.api.POST('/v1/keys/delegate', { body: input }));
  }

  // fleet nodes
  /** The public node registry: the gateway, TEE backends, then enrolled nodes (no credential needed). */
  nodes() {
    return this.call(this.api.GET('/v1/nodes'));
  }
  /** Session: enrolls a node for the signed-in account; the nk-svc_ key in the answer is shown once. */
  enrollNode(input: NodeEnrollInput) {
    return this.call(this.api.POST('/v1/nodes/enroll', { body: input }));
  }
  /** Session, node owner: sets or clears the `disabled` or `draining` gate. */
  gateNode(id: string, gate: NodeGate, set: boolean) {
    return this.call(this.api.POST('/v1/nodes/{id}/{gate}', { params: { path: { id, gate } }, body: { set } }));
  }
  /** Admin token (a `bearer` credential): sets or clears the `disabled` or `draining` gate of any node, house nodes included. */
  adminGateNode(id: string, gate: NodeGate, set: boolean) {
    return this.call(this.api.POST('/v1/admin/nodes/gate', { body: { node_id: id, gate, set } }));
  }
  /** Admin token (a `bearer` credential): approves a node for scheduling, or withdraws the approval. */
  approveNode(id: string, approved = true) {
    return this.call(this.api.POST('/v1/admin/nodes/approve', { body: { node_id: id, approved } }));
  }

  // money
  /** Session: the credit position (balance, held, leased, spendable). */
  balance(): Promise<Balance> {
    return this.call(this.api.GET('/v1/billing/balance'));
  }
  /** Public: how to pay (treasury, chains, USDT contracts, confirmations). */
  billingMethods(): Promise<BillingMethods> {
    return this.call(this.api.GET('/v1/billing/methods'));
  }
  /** Session: verifies an on-chain USDT transfer to the treasury and credits it once. */
  deposit(input: DepositInput): Promise<Deposit> {
    return this.call(this.api.POST('/v1/billing/deposits', { body: input }));
  }
  /** Session: lifetime totals, the 25 latest events and 14 daily buckets. */
  usage() {
    return this.call(this.api.GET('/v1/usage'));
  }
  /** Session: one page of metering events, newest first. */
  async usageEvents(query: Omit<UsageEventsQuery, 'format'> = {}) {
    const page = await this.call(this.api.GET('/v1/usage/events', { params: { query: { ...query, format: 'json' } } }));
    if (typeof page === 'string') throw new ApiError(502, { error: { type: 'upstream_error', message: 'gateway sent CSV where JSON was asked for' } }, new Headers());
    return page;
  }
  /** Session: one page of metering events as CSV (with its header line), and the cursor of the next page. */
  async usageEventsCsv(query: Omit<UsageEventsQuery, 'format'> = {}): Promise<{ csv: string; next_cursor: string | null }> {
    const out = await this.api.GET('/v1/usage/events', { params: { query: { ...query, format: 'csv' } }, parseAs: 'text' });
    const csv = await this.call(Promise.resolve(out));
    return { csv: csv ?? '', next_cursor: out.response.headers.get('x-next-cursor') };
  }

  // receipts
  /** Public: the receipt signer's address and scheme. */
  receiptPubkey() {
    return this.call(this.api.GET('/v1/receipts/pubkey'));
  }
  /** Session: one of your stored receipts, by request id or usage-event id. */
  receipt(id: string) {
    return this.call(this.api.GET('/v1/receipts/{id}', { params: { path: { id } } }));
  }

  // inference
  /** Public: the models served, with prices. */
  models() {
    return this.call(this.api.GET('/v1/models'));
  }
  /** API key: a chat completion answered as one JSON object (receipt in the x-svc-* headers). */
  chatCompletion(input: ChatCompletionInput) {
    return this.call(this.api.POST('/v1/chat/completions', { body: { ...input, stream: false } }));
  }
  /** API key: a streamed chat completion; the unread SSE Response (read it with `sseFrames`), or ApiError before the stream begins. */
  async chatCompletionStream(input: ChatCompletionInput, signal?: AbortSignal): Promise<Response> {
    const out = await this.api.POST('/v1/chat/completions', { body: { ...input, stream: true }, parseAs: 'stream', signal });
    if (!out.response.ok) throw new ApiError(out.response.status, out.error, out.response.headers);
    return out.response;
  }

  // sandboxes
  /** API key: a one-shot sandbox run answered when it ends (receipt in the x-svc-* headers). */
  runSandbox(input: SandboxRunInput, headers: Record<string, string> = {}) {
    return this.call(this.api.POST('/v1/sandboxes', { body: { ...input, stream: false }, headers }));
  }
  /** API key: a one-shot sandbox run streamed as SSE (stdout, stderr, result, receipt; `error` on failure). */
  async runSandboxStream(input: SandboxRunInput, opts: { headers?: Record<string, string>; signal?: AbortSignal } = {}): Promise<Response> {
    const out = await this.api.POST('/v1/sandboxes', { body: { ...input, stream: true }, headers: opts.headers, parseAs: 'stream', signal: opts.signal });
    if (!out.response.ok) throw new ApiError(out.response.status, out.error, out.response.headers);
    return out.response;
  }

  // webhooks
  webhooks() {
    return this.call(this.api.GET('/v1/webhooks'));
  }
  /** Session: the answer carries the signing secret, shown once. */
  createWebhook(input: WebhookInput) {
    return this.call(this.api.POST('/v1/webhooks', { body: input }));
  }
  deleteWebhook(id: string) {
    return this.call(this.api.DELETE('/v1/webhooks/{id}', { params: { path: { id } } }));
  }
  /** Session: queues a synthetic `webhook_test` event for the webhook. */
  testWebhook(id: string) {
    return this.call(this.api.POST('/v1/webhooks/{id}/test', { params: { path: { id } } }));
  }
  /** Session: the last 50 delivery attempts, newest first. */
  webhookDeliveries(id: string) {
    return this.call(this.api.GET('/v1/webhooks/{id}/deliveries', { params: { path: { id } } }));
  }
}
