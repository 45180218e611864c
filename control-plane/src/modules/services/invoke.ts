import { RECEIPT_HEADERS, Sealer, ServiceError, canonicalize, newId, notFound, sha256Hex, type SignedReceipt } from '@svc/shared';
import { isUniqueViolation } from '../../db/errors.ts';
import type { Agents } from '../agents/create.ts';
import { agentOf } from '../agents/store.ts';
import type { ReceiptSigner } from '../money/signer.ts';
import { forward, runAgent, type Delivered } from './delivery.ts';
import type { Facilitator } from './facilitator.ts';
import { PaymentRefused, SettlementUnconfirmed, checkAgainstTerms, readPayment, type Payment, type Settlement } from './payment.ts';
import type { ServicesDeps } from './service.ts';
import { UNCONFIRMED, callByAuthorization, callByPaymentId, dropClaim, insertCall, serviceBySlug, takeUnconfirmed, updateCall, type CallRow, type ServiceRow } from './store.ts';
import { headerValue, type Terms } from './terms.ts';

/** An answer of invoke: status, headers and JSON body, exactly as sent (and as replayed under the same payment identifier). */
export interface Answer {
  status: number;
  headers: Record<string, string>;
  body: unknown;
}

export const INVOKE_ROUTE = 'POST /v1/services/:slug/invoke';
const answerAad = (callId: string) => `service_calls.response:${callId}`;

/**
 * Invoking a service with an x402 payment. Without one: 402 with the terms (the body in version 1, the
 * PAYMENT-REQUIRED header in version 2). With one, in this order, each refusal a 402 naming its reason with
 * nothing moved or written: the payload's shape, scheme, network, token, payee, amount and validity window
 * against the terms, the authorization not spent before, and the library's verification (signature under the
 * token's EIP-712 domain, nonce and balance by simulation). The authorization is then claimed (one row per
 * token, payer and nonce), submitted on chain and confirmed, and only then is the service run: the hosted
 * agent through the agents module, or the seller's endpoint. The answer carries a signed receipt and
 * X-PAYMENT-RESPONSE; a service that fails after payment is answered 502 with the settled payment named, and
 * recorded. The same payment identifier with the same payload answers the first answer again without a
 * second transfer; with another payload, 409. A payment submitted but not confirmed in time is 504, and the
 * same payment presented again resumes its call (see resume).
 */
export class Invoker {
  private readonly sealer: Sealer;

  constructor(
    private readonly d: ServicesDeps & { agents: Agents; signer: ReceiptSigner; sealKey: Uint8Array },
  ) {
    this.sealer = new Sealer(d.sealKey);
  }

  async invoke(slug: string, headers: Record<string, string | string[] | undefined>, body: unknown, requestId: string): Promise<Answer> {
    const s = await serviceBySlug(this.d.db, slug);
    if (!s || s.status === 'retired') throw notFound('Service');
    const terms = this.d.terms;
    const fac = this.d.facilitator;
    if (!terms || !fac) throw new ServiceError('not_enabled', 'Marketplace payments are not configured on this gateway (SVC_MARKET_X402); no service can be invoked');
    if (!s.enabled) throw new ServiceError('conflict', `Service ${slug} is not taking calls (its seller disabled it); nothing was charged`, { reason: 'service_disabled' });
    if (s.kind === 'agent') await this.agentReady(s);

    let p: Payment | null;
    try {
      p = readPayment(headers);
    } catch (e) {
      if (e instanceof PaymentRefused) return this.required(terms, s, e.reason, e.message, requestId);
      throw e;
    }
    if (!p) return this.required(terms, s, 'payment_missing', 'This service is paid per call: send an x402 payment in X-PAYMENT (version 1) or PAYMENT-SIGNATURE (version 2)', requestId);
    const requestSha = sha256Hex(canonicalize(body ?? null));
    if (p.paymentId) {
      const prior = await callByPaymentId(this.d.db, s.id, p.paymentId);
      if (prior) return this.retried(prior, s, p, requestSha, requestId, body);
    }
    const x = this.d.config.x402!;
    const amount = terms.amount(s.price_micro_usd);
    const payer = p.authorization.from.toLowerCase();
    const nonce = p.authorization.nonce.toLowerCase();
    const req = terms.v2(s);
    const presented = await callByAuthorization(this.d.db, x.chain.chainId, x.asset, payer, nonce);
    // The same payload again after a 504 resumes its call, with or without a payment identifier.
    if (presented && resumable(presented, p, requestSha)) return this.resume(presented, s, p, requestId, body);
    try {
      if (presented) throw new PaymentRefused('payment_reused', 'this authorization (payer and nonce) was already presented; sign a new payment');
      checkAgainstTerms(p, { network: terms.network(p.version), asset: x.asset, payee: s.payee, amount, nowSeconds: Math.floor(this.d.clock.now().getTime() / 1000) });
      await fac.verify(p, req);
    } catch (e) {
      if (e instanceof PaymentRefused) return this.required(terms, s, e.reason, e.message, requestId, p.version);
      throw e;
    }

    const callId = newId('scall_');
    const now = this.d.clock.now();
    try {
      await insertCall(this.d.db, {
        id: callId,
        service_id: s.id,
        account_id: s.account_id,
        request_id: requestId,
        x402_version: p.version,
        network: p.network,
        chain_id: x.chain.chainId,
        asset: x.asset,
        payer,
        payee: s.payee,
        amount: amount.toString(),
        amount_micro_usd: s.price_micro_usd,
        nonce,
        valid_before: Number(p.authorization.validBefore),
        payment_id: p.paymentId,
        payment_sha256: p.sha256,
        request_sha256: requestSha,
        status: 'settling',
        tx_hash: null,
        block_number: null,
        error_type: null,
        error_message: null,
        response_status: null,
        response_sha256: null,
        response_sealed: null,
        receipt_payload: null,
        receipt_hash: null,
        receipt_signature: null,
        created_at: now,
        settled_at: null,
        ended_at: null,
      });
    } catch (e) {
      if (!isUniqueViolation(e)) throw e;
      const prior = p.paymentId ? await callByPaymentId(this.d.db, s.id, p.paymentId) : undefined;
      if (prior) return this.retried(prior, s, p, requestSha, requestId, body);
      return this.required(terms, s, 'payment_reused', 'this authorization (payer and nonce) was already presented; sign a new payment', requestId, p.version);
    }

    let settled: Settlement;
    try {
      settled = await fac.settle(p, req);
    } catch (e) {
      if (e instanceof SettlementUnconfirmed) {
        await updateCall(this.d.db, callId, { tx_hash: e.txHash, error_type: UNCONFIRMED, error_message: e.message });
        throw new ServiceError('upstream_timeout', `The payment was submitted (transaction ${e.txHash}) but not confirmed in time; the service did not run. Send the same payment and body again: once the transaction is confirmed the service runs then, once`, { call_id: callId, tx_hash: e.txHash });
      }
      await dropClaim(this.d.db, callId);
      if (e instanceof PaymentRefused) return this.required(terms, s, e.reason, e.message, requestId, p.version);
      throw e;
    }
    await updateCall(this.d.db, callId, { tx_hash: settled.txHash, block_number: settled.blockNumber, settled_at: this.d.clock.now() });
    return this.deliver(s, p, callId, requestId, requestSha, amount, settled, body);
  }

  /** Runs the paid service (the hosted agent or the seller's endpoint) and records its answer. */
  private async deliver(s: ServiceRow, p: Payment, callId: string, requestId: string, requestSha: string, amount: bigint, settled: Settlement, body: unknown): Promise<Answer> {
    const payer = p.authorization.from.toLowerCase();
    const input = JSON.stringify(body ?? null);
    const delivered =
      s.kind === 'agent'
        ? await runAgent(this.d.agents, s.account_id, s.agent_id!, input)
        : await forward(s.endpoint_url!, input, { slug: s.slug, callId, txHash: settled.txHash, payer }, { self: this.d.self, timeoutMs: this.d.config.endpointTimeoutMs });
    return this.finish(s, p, callId, requestId, requestSha, amount, settled, delivered);
  }

  /** A hosted agent that cannot run is refused before any payment is taken. */
  private async agentReady(s: ServiceRow): Promise<void> {
    let enabled = false;
    try {
      enabled = (await agentOf(this.d.db, s.account_id, s.agent_id!)).enabled;
    } catch {
      enabled = false;
    }
    if (!enabled) throw new ServiceError('conflict', `Service ${s.slug} is not taking calls (its hosted agent is disabled or gone); nothing was charged`, { reason: 'agent_unavailable' });
  }

  private async finish(s: ServiceRow, p: Payment, callId: string, requestId: string, requestSha: string, amount: bigint, settled: { txHash: string; blockNumber: number }, delivered: Delivered): Promise<Answer> {
    const x = this.d.config.x402!;
    const now = this.d.clock.now();
    const responseSha = sha256Hex(delivered.body);
    const network = this.d.terms!.network(p.version);
    const payment = {
      x402_version: p.version,
      network,
      payer: p.authorization.from.toLowerCase(),
      payee: s.payee,
      asset: x.asset,
      amount: amount.toString(),
      amount_micro_usd: s.price_micro_usd,
      tx_hash: settled.txHash,
      block_number: settled.blockNumber,
    };
    const receipt = this.d.signer.signReceipt({
      v: 1,
      id: requestId,
      kind: 'service_call',
      account_id: s.account_id,
      key_id: null,
      usage_event_id: callId,
      route: INVOKE_ROUTE,
      model: null,
      units: { calls: 1 },
      cost_micro_usd: s.price_micro_usd,
      created_at: now.toISOString(),
      run: null,
      policy: null,
      service: s.slug,
      status: delivered.ok ? 'delivered' : 'failed',
      payment,
      request_sha256: requestSha,
      response_sha256: responseSha,
      ...(delivered.agentRunId ? { agent_run_id: delivered.agentRunId } : {}),
    });
    const settle = { success: true, transaction: settled.txHash, network, payer: payment.payer };
    const headers: Record<string, string> = { ...receiptHeaders(receipt), 'x-payment-response': headerValue(settle), 'access-control-expose-headers': 'X-PAYMENT-RESPONSE, PAYMENT-RESPONSE' };
    if (p.version === 2) headers['payment-response'] = headerValue(settle);
    const receiptView = { payload: receipt.payload, hash: receipt.hash, signature: receipt.signature };
    const answer: Answer = delivered.ok
      ? {
          status: 200,
          headers,
          body: { object: 'service_call', id: callId, service: s.slug, status: 'delivered', ...result(delivered), result_sha256: responseSha, payment, receipt: receiptView },
        }
      : {
          status: 502,
          headers,
          body: {
            error: {
              type: 'upstream_error',
              message: `The payment settled (transaction ${settled.txHash}) but the service failed: ${delivered.error?.message ?? 'no answer'}. The call is recorded as failed`,
              reason: delivered.error?.type ?? 'service_failed',
              call_id: callId,
              service: s.slug,
              payment,
              receipt: receiptView,
            },
          },
        };
    await updateCall(this.d.db, callId, {
      status: delivered.ok ? 'delivered' : 'failed',
      error_type: delivered.ok ? null : (delivered.error?.type ?? 'service_failed'),
      error_message: delivered.ok ? null : (delivered.error?.message ?? null),
      response_status: answer.status,
      response_sha256: responseSha,
      response_sealed: this.sealer.seal(JSON.stringify(answer), answerAad(callId)),
      receipt_payload: receipt.canonical,
      receipt_hash: receipt.hash,
      receipt_signature: receipt.signature,
      ended_at: now,
    });
    return answer;
  }

  /** A retry under a payment identifier already used: a call left unconfirmed resumes; any other replays. */
  private retried(prior: CallRow, s: ServiceRow, p: Payment, requestSha: string, requestId: string, body: unknown): Promise<Answer> | Answer {
    return resumable(prior, p, requestSha) ? this.resume(prior, s, p, requestId, body) : this.replay(prior, p, requestSha);
  }

  /**
   * The same payment again after a 504 (submitted, not confirmed in time): its transaction is looked up once
   * more. Confirmed: the service runs now, at the price and payee of the first attempt, and only the retry that
   * takes the call runs it (another at the same moment is 409 in_progress, later ones replay the answer).
   * Reverted or moving something else: the claim is dropped and the answer is 402, nothing moved. Not mined
   * yet: 409 in_progress naming the transaction.
   */
  private async resume(prior: CallRow, s: ServiceRow, p: Payment, requestId: string, body: unknown): Promise<Answer> {
    let settled: Settlement | null;
    try {
      settled = await this.d.facilitator!.recheck(prior.tx_hash as `0x${string}`, p);
    } catch (e) {
      if (!(e instanceof PaymentRefused)) throw e;
      await dropClaim(this.d.db, prior.id);
      return this.required(this.d.terms!, s, e.reason, e.message, requestId, p.version);
    }
    if (!settled || !(await takeUnconfirmed(this.d.db, prior.id, settled, this.d.clock.now()))) return this.replay(prior, p, prior.request_sha256);
    const paid = { ...s, price_micro_usd: prior.amount_micro_usd, payee: prior.payee };
    return this.deliver(paid, p, prior.id, requestId, prior.request_sha256, BigInt(prior.amount), settled, body);
  }

  /** A retry under a payment identifier already used: the first answer again, or 409 when the payload or request differs. */
  private replay(prior: CallRow, p: Payment, requestSha: string): Answer {
    if (prior.payment_sha256 !== p.sha256 || prior.request_sha256 !== requestSha) {
      throw new ServiceError('idempotency_conflict', `The payment identifier ${p.paymentId} was used with another ${prior.payment_sha256 !== p.sha256 ? 'payment payload' : 'request body'}; a payment identifier names one payment`, { call_id: prior.id });
    }
    if (prior.status === 'settling' || !prior.response_sealed) {
      throw new ServiceError('conflict', `The payment under identifier ${p.paymentId} is still being settled${prior.tx_hash ? ` (transaction ${prior.tx_hash})` : ''}; retry shortly`, { reason: 'in_progress', call_id: prior.id });
    }
    const answer = JSON.parse(this.sealer.open(prior.response_sealed, answerAad(prior.id)).toString('utf8')) as Answer;
    return { ...answer, headers: { ...answer.headers, 'x-svc-replayed': 'true' } };
  }

  /**
   * 402 with the terms: the body is x402 version 1's PaymentRequired (`error` a string, as version 1 clients
   * read it), with the gateway's error object beside it in `svc_error`; the PAYMENT-REQUIRED header carries
   * version 2's.
   */
  required(terms: Terms, s: ServiceRow, reason: string, message: string, requestId: string, version?: 1 | 2): Answer {
    const error = `${reason}: ${message}`;
    const svcError = { type: 'payment_required', message: `Payment required (${reason}): ${message}`, reason, ...(version ? { x402_version: version } : {}), request_id: requestId };
    return {
      status: 402,
      headers: { 'payment-required': headerValue(terms.paymentRequiredV2(s, error)), 'access-control-expose-headers': 'PAYMENT-REQUIRED' },
      body: { ...terms.paymentRequiredV1(s, error), svc_error: svcError },
    };
  }
}

function receiptHeaders(r: SignedReceipt): Record<string, string> {
  return {
    [RECEIPT_HEADERS.id]: r.payload.id,
    [RECEIPT_HEADERS.payload]: Buffer.from(r.canonical).toString('base64url'),
    [RECEIPT_HEADERS.signature]: r.signature,
    [RECEIPT_HEADERS.signer]: r.payload.signer,
    [RECEIPT_HEADERS.cost]: String(r.payload.cost_micro_usd),
  };
}

/** The service's answer in the body: parsed JSON, text, or base64 for other bytes. */
function result(d: Delivered): Record<string, unknown> {
  const text = d.body.toString('utf8');
  if (/json/i.test(d.contentType)) {
    try {
      return { result: JSON.parse(text) as unknown, result_content_type: d.contentType };
    } catch {
      /* not JSON after all */
    }
  }
  if (/^text\//i.test(d.contentType) || /json/i.test(d.contentType)) return { result: text, result_content_type: d.contentType };
  return { result: d.body.toString('base64'), result_encoding: 'base64', result_content_type: d.contentType };
}

export type { Facilitator };

/** A call whose payment was submitted but not confirmed in time, presented again with the same payload and body. */
function resumable(prior: CallRow, p: Payment, requestSha: string): boolean {
  return prior.status === 'settling' && prior.error_type === UNCONFIRMED && prior.tx_hash !== null && prior.payment_sha256 === p.sha256 && prior.request_sha256 === requestSha;
}
