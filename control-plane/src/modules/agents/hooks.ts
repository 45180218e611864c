import { createHmac } from 'node:crypto';
import { ServiceError, digestEquals, newSecret, sha256Hex } from '@svc/shared';
import type { AgentsDeps } from './deps.ts';
import type { AgentRunner } from './runner.ts';
import { agentById, agentOf, purgeSignatures, rememberSignature, updateAgent, type AgentRow } from './store.ts';

export const HOOK_TOKEN_PREFIX = 'ahk_';
/** How far a signed call's X-Svc-Timestamp may be from the gateway's clock, either way; signatures are remembered this long. */
export const SIGNATURE_WINDOW_SECONDS = 300;
/** The largest hook body: it becomes the run's SVC_INPUT (one environment value). */
export const MAX_INPUT_BYTES = 32 * 1024;
export const MAX_SECRET_LENGTH = 256;

const secretAad = (agentId: string) => `agents.hook_secret:${agentId}`;

/** Wrong token, unknown agent, no hook: one answer, so a caller learns nothing about which. */
const hookNotFound = () => new ServiceError('not_found', 'Hook not found');
const badSignature = (why: string) => new ServiceError('invalid_credential', `X-Svc-Signature: ${why}`, { scheme: 'hex HMAC-SHA256 over "<X-Svc-Timestamp>.<raw body>" with the hook secret' });

export interface InboundHook {
  agentId: string;
  token: string;
  body: Buffer;
  timestamp: string | undefined;
  signature: string | undefined;
}

/**
 * Inbound hooks. The URL carries a token (stored as sha256; rotating replaces it at once; disabling drops it).
 * An optional secret (sealed, never returned) makes every call carry X-Svc-Timestamp (unix seconds, within
 * SIGNATURE_WINDOW_SECONDS of the gateway's clock) and X-Svc-Signature (hex HMAC-SHA256 over
 * "<timestamp>.<raw body>", optionally prefixed "sha256="); a signature is accepted once within the window.
 * A call that passes queues a run with the raw body as SVC_INPUT and starts executing it on this process.
 */
export class AgentHooks {
  constructor(
    private readonly d: AgentsDeps,
    private readonly runner: AgentRunner,
  ) {}

  urlOf(agentId: string, token: string): string {
    return new URL(`/v1/agents/${encodeURIComponent(agentId)}/hooks/${token}`, this.d.publicUrl).toString();
  }

  /** A new token; the previous one stops working in the same statement. The URL is shown this once. */
  async rotate(accountId: string, id: string) {
    await agentOf(this.d.db, accountId, id);
    const token = newSecret(HOOK_TOKEN_PREFIX);
    const now = this.d.clock.now();
    const a = await updateAgent(this.d.db, id, { hook_token_hash: sha256Hex(token), hook_created_at: now, updated_at: now });
    return { agent_id: id, object: 'agent.hook' as const, url: this.urlOf(id, token), created_at: now.toISOString(), signed: a.hook_secret_sealed !== null };
  }

  async disable(accountId: string, id: string) {
    await agentOf(this.d.db, accountId, id);
    const now = this.d.clock.now();
    const a = await updateAgent(this.d.db, id, { hook_token_hash: null, hook_created_at: null, updated_at: now });
    return { agent_id: id, object: 'agent.hook' as const, enabled: false as const, signed: a.hook_secret_sealed !== null };
  }

  /** Sets (sealed) or clears (null) the HMAC secret; never returned. */
  async setSecret(accountId: string, id: string, secret: string | null) {
    await agentOf(this.d.db, accountId, id);
    const now = this.d.clock.now();
    await updateAgent(this.d.db, id, { hook_secret_sealed: secret === null ? null : this.d.sealer.seal(secret, secretAad(id)), updated_at: now });
    return { agent_id: id, object: 'agent.hook_secret' as const, signed: secret !== null };
  }

  /** A public hook call: the token, then the signature when a secret is set; then a queued run (202). */
  async inbound(h: InboundHook) {
    const found = await agentById(this.d.db, h.agentId);
    const given = sha256Hex(h.token);
    // Compared in constant time on the hashes; a missing hook compares against the given hash itself, so the work is the same.
    const tokenOk = digestEquals(given, found?.hook_token_hash ?? given) && Boolean(found?.hook_token_hash);
    if (!found || !tokenOk) throw hookNotFound();
    const signature = found.hook_secret_sealed ? this.checkSignature(found, h) : null;
    if (h.body.length > MAX_INPUT_BYTES) throw new ServiceError('payload_too_large', `The hook body becomes SVC_INPUT and is limited to ${MAX_INPUT_BYTES} bytes`);
    if (h.body.includes(0)) throw new ServiceError('invalid_request', 'The hook body becomes SVC_INPUT, an environment value, which cannot carry a NUL byte', { param: 'body' });
    const run = await this.d.db.transaction().execute(async (trx) => {
      const a = await agentById(trx, h.agentId, true);
      // Rotated, disabled or deleted since the check above: the token is dead now.
      if (!a || a.hook_token_hash !== found.hook_token_hash) throw hookNotFound();
      await this.runner.admit(trx, a, { reserveCap: true });
      if (signature && !(await rememberSignature(trx, a.id, signature, this.d.clock.now()))) {
        throw new ServiceError('conflict', 'X-Svc-Signature: this signed call was received already (a replay); sign each call with a new timestamp', { reason: 'replayed' });
      }
      return this.runner.queue(trx, a, 'hook', h.body.toString('utf8'));
    });
    this.runner.kick();
    return { object: 'agent.run' as const, agent_id: run.agent_id, run_id: run.id, status: 'queued' as const, created_at: run.created_at.toISOString() };
  }

  /** The signature's hex when it is valid for this body and timestamp; 401 otherwise. */
  private checkSignature(a: AgentRow, h: InboundHook): string {
    if (!h.timestamp || !/^\d{1,12}$/.test(h.timestamp)) throw badSignature('a signed hook needs X-Svc-Timestamp (unix seconds)');
    const skew = Math.abs(this.d.clock.now().getTime() / 1000 - Number(h.timestamp));
    if (skew > SIGNATURE_WINDOW_SECONDS) throw badSignature(`X-Svc-Timestamp is more than ${SIGNATURE_WINDOW_SECONDS} s from the gateway's clock`);
    const given = (h.signature ?? '').trim().replace(/^sha256=/i, '').toLowerCase();
    if (!/^[0-9a-f]{64}$/.test(given)) throw badSignature('missing, or not 64 hex digits');
    const secret = this.d.sealer.open(a.hook_secret_sealed!, secretAad(a.id));
    const expected = createHmac('sha256', secret).update(`${h.timestamp}.`).update(h.body).digest('hex');
    if (!digestEquals(expected, given)) throw badSignature('does not match this body and timestamp');
    return given;
  }

  /** The leader's sweep: signatures older than the window cannot be replayed any more (their timestamps are refused). */
  async forgetOldSignatures(): Promise<number> {
    return purgeSignatures(this.d.db, new Date(this.d.clock.now().getTime() - 2 * SIGNATURE_WINDOW_SECONDS * 1000));
  }
}
