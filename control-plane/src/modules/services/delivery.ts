import http from 'node:http';
import https from 'node:https';
import { ServiceError } from '@svc/shared';
import { Refused, outboundLookup } from '../webhooks/outbound.ts';
import type { SelfAddress } from '../webhooks/url.ts';
import type { Agents } from '../agents/create.ts';

/** What a seller's service answered: an HTTP-like status, a content type and the body bytes. */
export interface Delivered {
  ok: boolean;
  status: number;
  contentType: string;
  body: Buffer;
  /** Why it failed, for the buyer and the call's record (no content). */
  error?: { type: string; message: string };
  /** The hosted agent's run (its own metered receipt on the seller's account). */
  agentRunId?: string;
}

/** The largest answer relayed from a seller's endpoint. */
export const MAX_ANSWER_BYTES = 1024 * 1024;

export interface CallContext {
  slug: string;
  callId: string;
  txHash: string;
  payer: string;
}

/** Runs a service's hosted agent through the agents module's run path, under the agent's own key: the request body is its SVC_INPUT, its stdout the answer. */
export async function runAgent(agents: Agents, accountId: string, agentId: string, body: string): Promise<Delivered> {
  try {
    const { result, run } = await agents.runner.runNow(accountId, agentId, body);
    const out = Buffer.from(result.stdout, 'utf8');
    const json = looksLikeJson(result.stdout);
    if (result.status === 'succeeded') return { ok: true, status: 200, contentType: json ? 'application/json' : 'text/plain; charset=utf-8', body: out, agentRunId: run.id };
    return {
      ok: false,
      status: 502,
      contentType: 'text/plain; charset=utf-8',
      body: out,
      agentRunId: run.id,
      error: { type: result.status === 'timed_out' ? 'agent_timed_out' : 'agent_failed', message: `the hosted agent's run ${run.id} ${result.status === 'timed_out' ? 'timed out' : `exited with code ${result.exit_code}`}` },
    };
  } catch (e) {
    const se = e instanceof ServiceError ? e : null;
    return { ok: false, status: 502, contentType: 'text/plain; charset=utf-8', body: Buffer.alloc(0), error: { type: se ? `agent_${se.type}` : 'agent_failed', message: se ? `the hosted agent did not run: ${se.message}` : 'the hosted agent did not run' } };
  }
}

/**
 * POSTs the buyer's body to the seller's endpoint: no redirects followed, under the outbound rules of
 * webhooks (never this gateway; only the public addresses the name resolved to, unless private addresses are
 * allowed: webhooks/outbound.ts), within the timeout, reading at most MAX_ANSWER_BYTES. A 2xx is delivered;
 * anything else is a failure after payment.
 */
export function forward(url: string, body: string, ctx: CallContext, o: { self: SelfAddress; timeoutMs: number }): Promise<Delivered> {
  const u = new URL(url);
  const failed = (type: string, message: string): Delivered => ({ ok: false, status: 502, contentType: 'text/plain; charset=utf-8', body: Buffer.alloc(0), error: { type, message } });
  let lookup;
  try {
    lookup = outboundLookup(u, o.self);
  } catch (e) {
    return Promise.resolve(failed('endpoint_refused', (e as Error).message));
  }
  return new Promise((resolve) => {
    const mod = u.protocol === 'https:' ? https : http;
    const signal = AbortSignal.timeout(o.timeoutMs);
    const req = mod.request(
      u,
      {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'content-length': String(Buffer.byteLength(body)),
          'x-svc-service': ctx.slug,
          'x-svc-call-id': ctx.callId,
          'x-svc-payment-tx': ctx.txHash,
          'x-svc-payer': ctx.payer,
        },
        lookup,
        signal,
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (c: Buffer) => {
          size += c.length;
          if (size > MAX_ANSWER_BYTES) {
            res.destroy();
            resolve(failed('endpoint_answer_too_large', `the endpoint answered more than ${MAX_ANSWER_BYTES} bytes`));
            return;
          }
          chunks.push(c);
        });
        res.on('end', () => {
          const status = res.statusCode ?? 0;
          const contentType = String(res.headers['content-type'] ?? 'application/octet-stream');
          const out = Buffer.concat(chunks);
          if (status >= 200 && status < 300) resolve({ ok: true, status, contentType, body: out });
          else resolve({ ok: false, status: 502, contentType, body: out, error: { type: 'endpoint_error', message: `the endpoint answered HTTP ${status}` } });
        });
        res.on('error', (e) => resolve(failed('endpoint_unreachable', `the endpoint's answer broke off (${e.name})`)));
      },
    );
    req.on('error', (e) => {
      if (e instanceof Refused) resolve(failed('endpoint_refused', e.message));
      else if (signal.aborted) resolve(failed('endpoint_timeout', `the endpoint did not answer within ${o.timeoutMs} ms`));
      else resolve(failed('endpoint_unreachable', `the endpoint could not be reached (${(e as NodeJS.ErrnoException).code ?? e.name})`));
    });
    req.end(body);
  });
}

function looksLikeJson(s: string): boolean {
  const t = s.trim();
  if (!t || !'{["'.includes(t[0]!)) return false;
  try {
    JSON.parse(t);
    return true;
  } catch {
    return false;
  }
}
