import { createSiweMessage } from 'viem/siwe';
import type { Scope } from '../scopes.ts';
import { ApiError } from './errors.ts';
import type { ApiKey, EnrolledNode, NewApiKey, NodeEnrollInput, NodeGate, NodeRegistryEntry, OwnerNode, SessionInfo, SignIn, Wallet } from './types.ts';

export { ApiError } from './errors.ts';
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

/**
 * Typed client for the gateway's JSON API; the CLI and the tests use it. Errors throw ApiError.
 * The base URL is the bare origin: paths carry their own /v1.
 */
export class SvcClient {
  readonly baseUrl: string;
  credential: Credential;
  private readonly fetchImpl: typeof fetch;

  constructor(opts: ClientOptions) {
    this.baseUrl = opts.baseUrl.replace(/\/+$/, '').replace(/\/v1$/, '');
    this.credential = opts.credential;
    this.fetchImpl = opts.fetch ?? fetch;
  }

  withCredential(credential: Credential): SvcClient {
    return new SvcClient({ baseUrl: this.baseUrl, credential, fetch: this.fetchImpl });
  }

  async raw(method: string, path: string, opts: RequestOptions = {}): Promise<Response> {
    const url = new URL(path, this.baseUrl + '/');
    for (const [k, v] of Object.entries(opts.query ?? {})) if (v !== undefined) url.searchParams.set(k, String(v));
    const headers: Record<string, string> = { ...opts.headers };
    const cred = opts.credential === null ? undefined : (opts.credential ?? this.credential);
    if (cred) headers.authorization = `Bearer ${cred.token}`;
    let body: RequestInit['body'];
    if (opts.body !== undefined) {
      if (opts.body instanceof Uint8Array || typeof opts.body === 'string') body = opts.body as RequestInit['body'];
      else {
        body = JSON.stringify(opts.body);
        headers['content-type'] ??= 'application/json';
      }
    }
    return this.fetchImpl(url, { method, headers, body });
  }

  async request<T>(method: string, path: string, opts: RequestOptions = {}): Promise<T> {
    const res = await this.raw(method, path, opts);
    const text = await res.text();
    const type = res.headers.get('content-type') ?? '';
    let parsed: unknown = text;
    if (type.includes('json') && text) {
      try {
        parsed = JSON.parse(text);
      } catch {
        if (res.ok) throw new ApiError(502, { error: { type: 'upstream_error', message: `gateway sent malformed JSON (HTTP ${res.status})` } }, res.headers);
      }
    }
    if (!res.ok) throw new ApiError(res.status, typeof parsed === 'object' && parsed !== null ? (parsed as never) : undefined, res.headers);
    return parsed as T;
  }

  // platform
  banner() {
    return this.request<{ name: string; version: string }>('GET', '/');
  }
  status() {
    return this.request<Record<string, unknown>>('GET', '/v1/status');
  }

  // identity
  nonce() {
    return this.request<{ nonce: string; expires_at: string }>('POST', '/v1/auth/nonce', { credential: null });
  }
  verify(message: string, signature: string) {
    return this.request<SignIn>('POST', '/v1/auth/verify', { body: { message, signature }, credential: null });
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
  async signIn(signer: MessageSigner, opts: { chainId?: number; issuedAt?: Date } = {}): Promise<{ client: SvcClient; session: SignIn }> {
    const { nonce } = await this.nonce();
    const message = this.siweMessage(signer.address, nonce, opts);
    const signature = await signer.signMessage({ message });
    const session = await this.verify(message, signature);
    return { client: this.withCredential({ kind: 'session', token: session.token }), session };
  }

  me() {
    return this.request<{ account_id: string; wallet_address: string | null }>('GET', '/v1/auth/me');
  }
  sessions() {
    return this.request<SessionInfo[]>('GET', '/v1/auth/sessions');
  }
  logout() {
    return this.request<{ revoked: number }>('POST', '/v1/auth/logout');
  }
  logoutAll() {
    return this.request<{ revoked: number }>('POST', '/v1/auth/logout-all');
  }
  wallets() {
    return this.request<Wallet[]>('GET', '/v1/auth/wallets');
  }
  async linkWallet(signer: MessageSigner, opts: { chainId?: number; issuedAt?: Date } = {}) {
    const { nonce } = await this.nonce();
    const message = this.siweMessage(signer.address, nonce, { ...opts, statement: 'Link this wallet to my gateway account.' });
    return this.request<Wallet>('POST', '/v1/auth/wallets', { body: { message, signature: await signer.signMessage({ message }) } });
  }
  unlinkWallet(address: string) {
    return this.request<{ address: string; unlinked: boolean }>('DELETE', `/v1/auth/wallets/${encodeURIComponent(address)}`);
  }

  // keys
  createKey(input: KeyInput = {}) {
    return this.request<NewApiKey>('POST', '/v1/keys', { body: input });
  }
  listKeys() {
    return this.request<ApiKey[]>('GET', '/v1/keys');
  }
  revokeKey(id: string) {
    return this.request<{ id: string; revoked: boolean; revoked_ids: string[] }>('DELETE', `/v1/keys/${encodeURIComponent(id)}`);
  }
  rotateKey(id: string, graceSeconds?: number) {
    return this.request<NewApiKey & { replaces: { id: string; expires_at: string; status: string } }>('POST', `/v1/keys/${encodeURIComponent(id)}/rotate`, {
      body: graceSeconds === undefined ? {} : { grace_seconds: graceSeconds },
    });
  }
  unfreezeKey(id: string) {
    return this.request<ApiKey & { was_frozen: boolean }>('POST', `/v1/keys/${encodeURIComponent(id)}/unfreeze`);
  }
  /** Called with an API key credential: mints a child of that key. */
  delegateKey(input: KeyInput = {}) {
    return this.request<NewApiKey>('POST', '/v1/keys/delegate', { body: input });
  }

  // fleet nodes
  /** The public node registry: the gateway, TEE backends, then enrolled nodes (no credential needed). */
  nodes() {
    return this.request<NodeRegistryEntry[]>('GET', '/v1/nodes');
  }
  /** Session: enrolls a node for the signed-in account; the nk-svc_ key in the answer is shown once. */
  enrollNode(input: NodeEnrollInput) {
    return this.request<EnrolledNode>('POST', '/v1/nodes/enroll', { body: input });
  }
  /** Session, node owner: sets or clears the `disabled` or `draining` gate. */
  gateNode(id: string, gate: NodeGate, set: boolean) {
    return this.request<OwnerNode>('POST', `/v1/nodes/${encodeURIComponent(id)}/${gate}`, { body: { set } });
  }
  /** Admin token (a `bearer` credential): sets or clears the `disabled` or `draining` gate of any node, house nodes included. */
  adminGateNode(id: string, gate: NodeGate, set: boolean) {
    return this.request<OwnerNode>('POST', '/v1/admin/nodes/gate', { body: { node_id: id, gate, set } });
  }
  /** Admin token (a `bearer` credential): approves a node for scheduling, or withdraws the approval. */
  approveNode(id: string, approved = true) {
    return this.request<OwnerNode>('POST', '/v1/admin/nodes/approve', { body: { node_id: id, approved } });
  }
}

export interface KeyInput {
  name?: string;
  scopes?: Scope[];
  spend_cap_micro_usd?: number;
  expires_at?: string;
}
