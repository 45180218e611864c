import { performance } from 'node:perf_hooks';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Sealer, ServiceError, canonicalize, sha256Hex, type Clock, type SignedReceipt } from '@svc/shared';
import type { McpConfig } from '../../config/mcp.ts';
import type { KeyPrincipal } from '../../http/auth-types.ts';
import { requireKey } from '../../http/auth.ts';
import { setReceiptHeaders } from '../../http/receipt-headers.ts';
import { runIdOf } from '../../http/run-id.ts';
import type { Metering } from '../money/metering.ts';
import type { SelfAddress } from '../webhooks/url.ts';
import { RPC, RpcFailure, asFailure, assertCallable, parseMessage, sendFailure, sessionNotFound, transportRefusal, type RpcId, type RpcMessage } from './jsonrpc.ts';
import { CallerAnswer, answerOf, answers, eventMessage, upstreamFailure } from './proxy-io.ts';
import { receiptMeta } from './receipt-meta.ts';
import type { SseEvent } from './sse-read.ts';
import { ListedTools } from './tool-names.ts';
import { toolError } from './server.ts';
import type { McpServersService, UpstreamTarget } from './service.ts';
import { UpstreamFailure, dial } from './upstream.ts';

export const GATEWAY_ROUTE = 'POST /v1/mcp/servers/:id';
const SESSION_HEADER = 'mcp-session-id';
const SESSION_PREFIX = 'mcpg_';
const PAYMENT_TYPES = new Set(['insufficient_credit', 'spend_cap_reached', 'circuit_breaker_tripped']);

/** The upstream answered the call with a JSON-RPC error: the tool did not run, nothing is charged. */
class NotRun extends Error {
  constructor(readonly status: number, readonly text: string) {
    super('the upstream refused the call');
  }
}

type Json = Record<string, unknown>;

/**
 * The MCP gateway: a passthrough session to a registered server. Messages go to the upstream as the caller
 * sent them, with the gateway's credential for it attached here (never seen by the caller) and none of the
 * caller's headers but the transport's own. `tools/list` answers are filtered by the allow list; each
 * `tools/call` is checked against it before anything is dialed, held at the server's price, and settled as
 * an `mcp_call` usage event whose receipt attests the action (server, tool, sha256 of the canonical
 * arguments and of the result, duration, outcome), never the content. The upstream's session id reaches the
 * caller sealed to the server and the account, so any process of the deployment serves it and it opens
 * nothing elsewhere.
 */
export class McpGateway {
  private readonly sealer: Sealer;
  private readonly resources = new Map<string, string>();
  private readonly listed: ListedTools;

  constructor(
    private readonly d: {
      registrations: McpServersService;
      metering: Metering;
      sealKey: Uint8Array;
      clock: Clock;
      self: SelfAddress;
      config: McpConfig;
      publicUrl: URL;
      log: { error(o: object, msg: string): void };
    },
  ) {
    this.sealer = new Sealer(d.sealKey);
    this.listed = new ListedTools(d.clock);
  }

  async post(req: FastifyRequest, reply: FastifyReply, serverId: string): Promise<FastifyReply> {
    const refused = transportRefusal(req);
    if (refused) return sendFailure(reply, refused);
    let msg: RpcMessage;
    try {
      msg = parseMessage(req.body as Buffer | undefined);
      assertCallable(msg); // a tools/call without an id would reach the upstream unchecked and unmetered
    } catch (e) {
      return sendFailure(reply, asFailure(e, null));
    }
    const id = msg.id ?? null;
    const answer = new CallerAnswer(reply);
    try {
      const p = requireKey(req);
      const target = await this.target(p, serverId);
      const session = this.openSession(req, target, id);
      if (msg.method === 'tools/call') return await this.call(req, answer, p, target, msg as RpcMessage & { id: string | number }, session);
      return await this.forward(req, answer, target, msg, session);
    } catch (e) {
      if (e instanceof UpstreamFailure) return answer.fail(upstreamFailure(e, id));
      return answer.fail(asFailure(e, id));
    }
  }

  /** DELETE: ends the upstream session the caller's Mcp-Session-Id stands for. */
  async end(req: FastifyRequest, reply: FastifyReply, serverId: string): Promise<FastifyReply> {
    try {
      const p = requireKey(req);
      const target = await this.target(p, serverId);
      const session = this.openSession(req, target, null);
      if (!session) throw new RpcFailure(400, RPC.transport, 'Bad Request: Mcp-Session-Id header is required', 'invalid_request');
      const signal = AbortSignal.timeout(this.d.config.upstreamTimeoutMs);
      const res = await dial(target.url, { method: 'DELETE', headers: this.headers(req, target, session), signal }, this.d.self);
      res.resume();
      const status = res.statusCode ?? 502;
      if (status === 404) throw sessionNotFound(null);
      if (status === 405) throw new RpcFailure(405, RPC.transport, 'Method not allowed: the MCP server does not let clients end sessions', 'method_not_allowed');
      if (status < 200 || status >= 300) throw new UpstreamFailure('status', `the upstream failed (HTTP ${status})`);
      return reply.code(200).send();
    } catch (e) {
      return sendFailure(reply, e instanceof UpstreamFailure ? upstreamFailure(e, null) : asFailure(e, null));
    }
  }

  /** The caller's live, enabled registration; one 404 for unknown, another account's, deregistered and disabled. */
  private async target(p: KeyPrincipal, serverId: string): Promise<UpstreamTarget> {
    const t = await this.d.registrations.target(p.accountId, serverId);
    if (!t.enabled) throw new ServiceError('not_found', 'MCP server not found');
    return t;
  }

  private aad(target: UpstreamTarget): string {
    return `mcp_session:${target.id}:${target.accountId}`;
  }

  /** The upstream session id inside the caller's Mcp-Session-Id; an id this gateway did not seal for this server and account is 404. */
  private openSession(req: FastifyRequest, target: UpstreamTarget, id: RpcId): string | undefined {
    const given = req.headers[SESSION_HEADER];
    if (given === undefined) return undefined;
    if (typeof given !== 'string' || !given.startsWith(SESSION_PREFIX) || given.length > 1024) throw sessionNotFound(id);
    try {
      return this.sealer.open(Buffer.from(given.slice(SESSION_PREFIX.length), 'base64url'), this.aad(target)).toString('utf8');
    } catch {
      throw sessionNotFound(id);
    }
  }

  /** The upstream's session id as the caller sees it, on the answer about to start (the caller's own when unchanged). */
  private passSession(answer: FastifyReply, target: UpstreamTarget, upstream: string | string[] | undefined, session: string | undefined): void {
    if (typeof upstream !== 'string' || !upstream || upstream.length > 512) return;
    const given = answer.request.headers[SESSION_HEADER];
    const sealed = upstream === session && typeof given === 'string' ? given : SESSION_PREFIX + this.sealer.seal(upstream, this.aad(target)).toString('base64url');
    answer.raw.setHeader(SESSION_HEADER, sealed);
  }

  private headers(req: FastifyRequest, target: UpstreamTarget, session: string | undefined): Record<string, string> {
    const h: Record<string, string> = { ...target.headers, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'user-agent': 'svc-gateway-mcp' };
    const version = req.headers['mcp-protocol-version'];
    if (typeof version === 'string' && version.length <= 32) h['mcp-protocol-version'] = version;
    if (session !== undefined) h[SESSION_HEADER] = session;
    return h;
  }

  private resource(serverId: string): string {
    let r = this.resources.get(serverId);
    if (r === undefined) {
      r = new URL(`/v1/mcp/servers/${serverId}`, this.d.publicUrl).toString();
      if (this.resources.size > 10_000) this.resources.clear();
      this.resources.set(serverId, r);
    }
    return r;
  }

  /**
   * Sends the message upstream and answers with what comes back: JSON as it came (a `tools/list` result
   * filtered by the allow list), an event stream relayed event by event. Nothing is metered.
   */
  private async forward(req: FastifyRequest, answer: CallerAnswer, target: UpstreamTarget, msg: RpcMessage, session: string | undefined): Promise<FastifyReply> {
    const id = msg.id ?? null;
    const reply = answer.reply;
    const signal = AbortSignal.timeout(this.d.config.upstreamTimeoutMs);
    const res = await dial(target.url, { method: 'POST', headers: this.headers(req, target, session), body: req.body as Buffer, signal }, this.d.self);
    const up = await answerOf(res, id, session !== undefined, signal);
    this.passSession(reply, target, res.headers[SESSION_HEADER], session);
    const listing = msg.method === 'tools/list' && id !== null;
    const firstPage = msg.params?.cursor === undefined;
    const seen = (m: Json): Json => {
      if (!listing || !answers(m, id) || !m.result) return m;
      this.listed.record(target.id, target.version, m.result, firstPage);
      return target.allowed ? this.filterTools(m, target.allowed) : m;
    };
    switch (up.kind) {
      case 'accepted':
        return reply.code(202).send();
      case 'refusal':
        return answer.send(up.text, up.status);
      case 'json':
        return answer.send(listing ? seen(up.message) : up.text);
      case 'sse': {
        answer.begin();
        for await (const e of up.events) {
          const m = id !== null ? eventMessage(e) : null;
          if (m && answers(m, id)) {
            res.destroy(); // the answer ends the exchange; what may follow it is not read
            return listing ? answer.send(seen(m)) : answer.send(e.data);
          }
          answer.relay(e);
        }
        return answer.end();
      }
    }
  }

  private filterTools(m: Json, allowed: ReadonlySet<string>): Json {
    const result = m.result as { tools?: unknown } | undefined;
    if (!result || !Array.isArray(result.tools)) return m;
    return { ...m, result: { ...result, tools: result.tools.filter((t: { name?: unknown }) => typeof t?.name === 'string' && allowed.has(t.name)) } };
  }

  /**
   * Whether a call may name the tool, decided before anything is held or dialed: on the allow list where the
   * server has one, else among the tools the server lists (asked for again when a name was not seen).
   */
  private async admit(req: FastifyRequest, target: UpstreamTarget, session: string | undefined, name: string, id: RpcId): Promise<void> {
    if (target.allowed) {
      if (target.allowed.has(name)) return;
      throw new RpcFailure(200, RPC.invalidParams, `Tool ${name} is not on this server's allow list`, 'tool_not_allowed', id, { tool: name });
    }
    let known = this.listed.lookup(target.id, target.version, name);
    if (known === 'ask') {
      await this.listTools(req, target, session);
      known = this.listed.lookup(target.id, target.version, name);
    }
    if (known !== 'listed') throw new RpcFailure(200, RPC.invalidParams, `Tool ${name} not found: the server does not list it`, 'tool_not_found', id, { tool: name });
  }

  /** Asks the upstream for its tools (every page, at most 50), in the caller's session. */
  private async listTools(req: FastifyRequest, target: UpstreamTarget, session: string | undefined): Promise<void> {
    let cursor: unknown;
    for (let page = 0; page < 50; page++) {
      const id = `svc-gateway/tools/list/${req.id}/${page}`;
      const body = JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/list', params: cursor === undefined ? {} : { cursor } });
      const r = await this.roundTrip(req, null, target, session, body, id, null);
      if (r.status !== 200 || r.message.error !== undefined) throw new UpstreamFailure('status', 'the upstream refused to list its tools');
      this.listed.record(target.id, target.version, r.message.result, page === 0);
      cursor = (r.message.result as { nextCursor?: unknown } | undefined)?.nextCursor;
      if (typeof cursor !== 'string' || !cursor) return;
    }
  }

  /** One metered tools/call: refused before anything is held or dialed unless the server admits the tool. */
  private async call(req: FastifyRequest, answer: CallerAnswer, p: KeyPrincipal, target: UpstreamTarget, msg: RpcMessage & { id: string | number }, session: string | undefined): Promise<FastifyReply> {
    const id = msg.id;
    const name = msg.params?.name;
    if (typeof name !== 'string' || name.length === 0 || name.length > 256) throw new RpcFailure(200, RPC.invalidParams, 'Invalid params: tools/call needs params.name, a tool name', 'invalid_request', id);
    const args = msg.params?.arguments;
    if (args !== undefined && (typeof args !== 'object' || args === null || Array.isArray(args))) throw new RpcFailure(200, RPC.invalidParams, 'Invalid params: arguments must be an object', 'invalid_request', id);
    await this.admit(req, target, session, name, id);
    const argumentsSha256 = sha256Hex(canonicalize(args ?? {}));
    const reply = answer.reply;
    let settled: { result: Json } & { receipt: SignedReceipt };
    try {
      settled = await this.d.metering.meter(
        { principal: p, requestId: req.id, runId: runIdOf(req), maxCostMicroUsd: target.priceMicroUsd, route: GATEWAY_ROUTE, resource: this.resource(target.id) },
        async () => {
          const started = performance.now();
          const r = await this.roundTrip(req, reply, target, session, req.body as Buffer, id, (e) => {
            answer.begin();
            answer.relay(e);
          });
          if (r.status !== 200 || r.message.error !== undefined) throw new NotRun(r.status, r.text);
          const result = r.message.result;
          if (!result || typeof result !== 'object' || Array.isArray(result)) throw new UpstreamFailure('garbage', 'the upstream answered tools/call without a result object');
          const outcome = (result as Json).isError === true ? 'tool_error' : 'ok';
          const detail = {
            arguments_sha256: argumentsSha256,
            duration_ms: Math.round(performance.now() - started),
            outcome,
            result_sha256: sha256Hex(canonicalize(result)),
            server_id: target.id,
            tool: name,
          };
          return { result: r.message, usage: { costMicroUsd: target.priceMicroUsd, kind: 'mcp_call', units: { calls: 1 }, detail } };
        },
        { behind: true },
      );
    } catch (e) {
      if (e instanceof NotRun) return answer.send(e.text, e.status);
      if (e instanceof UpstreamFailure) return answer.fail(upstreamFailure(e, id));
      if (e instanceof ServiceError && PAYMENT_TYPES.has(e.type)) return answer.send({ jsonrpc: '2.0', id, result: toolError(e, req.id, this.d.log) });
      throw e;
    }
    const final = settled.result;
    const result = final.result as Json;
    const meta = result._meta && typeof result._meta === 'object' ? (result._meta as Json) : {};
    if (!answer.streaming) setReceiptHeaders(reply, settled.receipt);
    return answer.send({ ...final, result: { ...result, _meta: { ...meta, ...receiptMeta(settled.receipt) } } });
  }

  /**
   * Sends one request upstream and reads its response: the upstream's JSON-RPC response (a refusal with its
   * 4xx status), relaying what comes before it on an event stream. Anything else is an UpstreamFailure.
   */
  private async roundTrip(req: FastifyRequest, caller: FastifyReply | null, target: UpstreamTarget, session: string | undefined, body: Buffer | string, id: string | number, relay: ((e: SseEvent) => void) | null): Promise<{ status: number; text: string; message: Json }> {
    const signal = AbortSignal.timeout(this.d.config.upstreamTimeoutMs);
    const res = await dial(target.url, { method: 'POST', headers: this.headers(req, target, session), body, signal }, this.d.self);
    const up = await answerOf(res, id, session !== undefined, signal);
    if (caller) this.passSession(caller, target, res.headers[SESSION_HEADER], session);
    switch (up.kind) {
      case 'accepted':
        throw new UpstreamFailure('garbage', 'the upstream accepted a request without answering it');
      case 'refusal':
        return { status: up.status, text: up.text, message: JSON.parse(up.text) as Json };
      case 'json':
        if (!answers(up.message, id)) throw new UpstreamFailure('garbage', 'the upstream answered with a message that is not the response to the request');
        return { status: 200, text: up.text, message: up.message };
      case 'sse':
        for await (const e of up.events) {
          const m = eventMessage(e);
          if (m && answers(m, id)) {
            res.destroy(); // what may follow the answer is not read
            return { status: 200, text: e.data, message: m };
          }
          relay?.(e);
        }
        throw new UpstreamFailure('garbage', 'the upstream ended its event stream without answering the request');
    }
  }
}
