import type { Kysely } from 'kysely';
import type { Database } from '../../db/database.ts';
import { Sealer, ServiceError, invalid, newId, notFound, type Clock } from '@svc/shared';
import type { McpConfig } from '../../config/mcp.ts';
import type { DB, McpServersTable } from '../../db/schema.ts';
import { checkWebhookUrl, type SelfAddress } from '../webhooks/url.ts';
import { destroyServer, insertServer, listServers, ownServer, updateServer, type ServerRow } from './store.ts';
import type { UpstreamTarget } from './target.ts';

export type { UpstreamTarget } from './target.ts';

export interface ServerInput {
  name: string;
  url: string;
  credential?: string | null | undefined;
  credential_header?: string | null | undefined;
  allowed_tools?: string[] | null | undefined;
  price_micro_usd_per_call?: number | null | undefined;
  enabled?: boolean | undefined;
}

export type ServerPatch = Partial<ServerInput>;

export interface ServerView {
  id: string;
  object: 'mcp_server';
  name: string;
  proxy_url: string;
  allowed_tools: string[] | null;
  price_micro_usd_per_call: number;
  price_is_default: boolean;
  enabled: boolean;
  has_credential: boolean;
  credential_header: string | null;
  created_at: string;
  updated_at: string;
}

/** Changes of registrations, so every process drops what it cached of them (payload: the server id). */
export const MCP_SERVERS_CHANNEL = 'svc_mcp_servers';
/** How long a process keeps an unsealed registration without hearing of a change (a safety net under NOTIFY). */
const CACHE_MS = 60_000;
const CACHE_MAX = 10_000;

/** Header names the credential may not go in: they carry the transport's own meaning. */
const RESERVED_HEADERS = new Set(['host', 'content-type', 'content-length', 'accept', 'connection', 'transfer-encoding', 'mcp-session-id', 'mcp-protocol-version', 'last-event-id', 'cookie']);

/**
 * Registrations of third-party MCP servers. URL and credential are sealed at rest (AES-256-GCM under the seal
 * key, bound to the row and column) and never returned; the URL follows the webhook rules (checked here, and
 * again with its resolved addresses on every connection). Deregistering nulls both ciphertexts.
 */
export class McpServersService {
  private readonly sealer: Sealer;
  /** Unsealed registrations the gateway route reads on every call, by id; dropped on any change (NOTIFY). */
  private readonly cache = new Map<string, { target: UpstreamTarget; at: number }>();
  /** Counts invalidations: a lookup that overlapped one does not cache what it read (it may predate the change). */
  private epoch = 0;
  private unlisten: (() => Promise<void>) | undefined;

  constructor(
    private readonly d: { db: Kysely<DB>; clock: Clock; sealKey: Uint8Array; self: SelfAddress; config: McpConfig; publicUrl: URL },
  ) {
    this.sealer = new Sealer(d.sealKey);
  }

  /** Hears of changes made by other processes (NOTIFY), so their cached registrations go at once. */
  async start(database: Database): Promise<void> {
    this.unlisten = await database.listen(MCP_SERVERS_CHANNEL, (id) => this.drop(id));
  }

  async stop(): Promise<void> {
    await this.unlisten?.();
  }

  private drop(id: string): void {
    this.epoch++;
    this.cache.delete(id);
  }

  /** Drops the cached registration here and, by NOTIFY, in every other process. */
  private async changed(id: string): Promise<void> {
    this.drop(id);
    await this.d.db.selectNoFrom((eb) => eb.fn('pg_notify', [eb.val(MCP_SERVERS_CHANNEL), eb.val(id)]).as('n')).execute();
  }

  get defaultPrice(): number {
    return this.d.config.defaultPriceMicroUsd;
  }

  private seal(value: string, id: string, column: 'url' | 'credential'): string {
    return this.sealer.seal(value, `mcp_servers.${column}:${id}`).toString('base64');
  }

  private open(sealed: string, id: string, column: 'url' | 'credential'): string {
    return this.sealer.open(Buffer.from(sealed, 'base64'), `mcp_servers.${column}:${id}`).toString('utf8');
  }

  /** The URL in its stored form: an http(s) URL under the webhook rules, without a fragment. */
  private checkUrl(raw: string): string {
    const url = checkWebhookUrl(raw, this.d.self);
    const u = new URL(url);
    if (u.hash) throw invalid('url: must not carry a fragment (#...)', 'url');
    return url;
  }

  private static header(raw: string | null | undefined): string | null {
    if (raw === undefined || raw === null) return null;
    const h = raw.trim().toLowerCase();
    if (h === 'authorization') return null;
    if (RESERVED_HEADERS.has(h)) throw invalid(`credential_header: ${h} is set by the gateway itself`, 'credential_header');
    return h;
  }

  async create(accountId: string, input: ServerInput): Promise<ServerView> {
    const url = this.checkUrl(input.url);
    const id = newId('mcpsrv_', 24);
    const now = this.d.clock.now();
    const row = await insertServer(this.d.db, {
      id,
      account_id: accountId,
      name: input.name,
      url_sealed: this.seal(url, id, 'url'),
      credential_sealed: input.credential ? this.seal(input.credential, id, 'credential') : null,
      credential_header: McpServersService.header(input.credential_header),
      allowed_tools: input.allowed_tools ? [...new Set(input.allowed_tools)] : null,
      price_micro_usd_per_call: input.price_micro_usd_per_call ?? null,
      enabled: input.enabled ?? true,
      created_at: now,
      updated_at: now,
      deleted_at: null,
    });
    return this.view(row);
  }

  async list(accountId: string): Promise<{ servers: ServerView[]; default_price_micro_usd_per_call: number }> {
    const rows = await listServers(this.d.db, accountId);
    return { servers: rows.map((r) => this.view(r)), default_price_micro_usd_per_call: this.defaultPrice };
  }

  async update(accountId: string, id: string, patch: ServerPatch): Promise<ServerView> {
    const set: Partial<Record<keyof McpServersTable, unknown>> = { updated_at: this.d.clock.now() };
    if (patch.name !== undefined) set.name = patch.name;
    if (patch.url !== undefined) set.url_sealed = this.seal(this.checkUrl(patch.url), id, 'url');
    if (patch.credential !== undefined) set.credential_sealed = patch.credential ? this.seal(patch.credential, id, 'credential') : null;
    if (patch.credential_header !== undefined) set.credential_header = McpServersService.header(patch.credential_header);
    if (patch.allowed_tools !== undefined) set.allowed_tools = patch.allowed_tools ? JSON.stringify([...new Set(patch.allowed_tools)]) : null;
    if (patch.price_micro_usd_per_call !== undefined) set.price_micro_usd_per_call = patch.price_micro_usd_per_call;
    if (patch.enabled !== undefined) set.enabled = patch.enabled;
    const row = await updateServer(this.d.db, accountId, id, set as never);
    if (!row) throw notFound('MCP server');
    await this.changed(id);
    return this.view(row);
  }

  /** Deregisters: the sealed URL and credential are destroyed; the content-free row stays for receipts that name it. */
  async remove(accountId: string, id: string): Promise<{ id: string; object: 'mcp_server'; deleted: true }> {
    const row = await destroyServer(this.d.db, accountId, id, this.d.clock.now());
    if (!row) throw notFound('MCP server');
    await this.changed(id);
    return { id, object: 'mcp_server', deleted: true };
  }

  /**
   * The account's live registration with its URL and credential unsealed; 404 for anything else. Kept in
   * memory until it changes (this process drops it at once, others on the NOTIFY) or for a minute.
   */
  async target(accountId: string, id: string): Promise<UpstreamTarget> {
    const now = this.d.clock.now().getTime();
    const hit = this.cache.get(id);
    if (hit && now - hit.at < CACHE_MS && hit.target.accountId === accountId) return hit.target;
    const epoch = this.epoch;
    const row = id.length <= 64 ? await ownServer(this.d.db, accountId, id) : undefined;
    if (!row || !row.url_sealed) throw notFound('MCP server');
    const target = this.targetOf(row);
    if (epoch === this.epoch) {
      if (this.cache.size >= CACHE_MAX) this.cache.clear();
      this.cache.set(id, { target, at: now });
    }
    return target;
  }

  targetOf(row: ServerRow): UpstreamTarget {
    const headers: Record<string, string> = {};
    if (row.credential_sealed) {
      const credential = this.open(row.credential_sealed, row.id, 'credential');
      headers[row.credential_header ?? 'authorization'] = row.credential_header ? credential : `Bearer ${credential}`;
    }
    return {
      id: row.id,
      accountId: row.account_id,
      version: `${row.updated_at.getTime()}:${row.url_sealed!.slice(-24)}`, // the sealed URL's tag: new with every URL
      url: new URL(this.open(row.url_sealed!, row.id, 'url')),
      headers,
      allowed: row.allowed_tools ? new Set(row.allowed_tools) : null,
      priceMicroUsd: row.price_micro_usd_per_call ?? this.defaultPrice,
      enabled: row.enabled,
    };
  }

  /** Probes the upstream: initialize, then tools/list (every page); answers the tool names only. */
  async test(accountId: string, id: string): Promise<{ id: string; object: 'mcp_server.test'; tools: string[] }> {
    const target = await this.target(accountId, id);
    try {
      return { id, object: 'mcp_server.test', tools: await (await import('./probe.ts')).probeTools(target, this.d.self, this.d.config.upstreamTimeoutMs) }; // the SDK's client loads with the first probe
    } catch (e) {
      if (e instanceof ServiceError) throw e;
      throw new ServiceError('upstream_error', `The MCP server did not answer initialize and tools/list: ${(e as Error).message}`);
    }
  }

  view(row: ServerRow): ServerView {
    return {
      id: row.id,
      object: 'mcp_server',
      name: row.name,
      proxy_url: new URL(`/v1/mcp/servers/${row.id}`, this.d.publicUrl).toString(),
      allowed_tools: row.allowed_tools,
      price_micro_usd_per_call: row.price_micro_usd_per_call ?? this.defaultPrice,
      price_is_default: row.price_micro_usd_per_call === null,
      enabled: row.enabled,
      has_credential: row.credential_sealed !== null,
      credential_header: row.credential_header,
      created_at: row.created_at.toISOString(),
      updated_at: row.updated_at.toISOString(),
    };
  }
}
