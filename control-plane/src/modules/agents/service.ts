import { LANGUAGES, SCOPE_NAMES, ServiceError, invalid, newId, sha256Hex, type Language, type Scope } from '@svc/shared';
import type { KeysService } from '../keys/service.ts';
import type { AgentsDeps } from './deps.ts';
import { codeAad, keyAad } from './runner.ts';
import { checkSchedule, nextRunOf } from './scheduler.ts';
import { agentCount, agentOf, deleteAgent, insertAgent, listAgents, updateAgent, type AgentRow } from './store.ts';
import { listRuns, runOf, type RunRow } from './store-runs.ts';

/** Agents an account holds at once (spec: 20 per account). */
export const MAX_AGENTS = 20;
/** The largest program an agent holds. */
export const MAX_CODE_BYTES = 256 * 1024;
/** The agent key's spend cap when the deploy names none: $5. */
export const DEFAULT_AGENT_CAP_MICRO_USD = 5_000_000;
export const DEFAULT_MAX_RUNS_PER_HOUR = 60;
export const MAX_RUNS_PER_HOUR_LIMIT = 3600;
export const DEFAULT_TIMEOUT_SECONDS = 30;
/** The agent key's scopes when the deploy names none: every scope but billing and minting sub-keys. */
export const DEFAULT_AGENT_SCOPES: Scope[] = SCOPE_NAMES.filter((s) => s !== 'billing' && s !== 'keys:delegate');

export interface DeployInput {
  name: string;
  language: Language;
  code: string;
  schedule?: string | null | undefined;
  spend_cap_micro_usd?: number | undefined;
  parent_key_id?: string | undefined;
  scopes?: Scope[] | undefined;
  timeout_seconds?: number | undefined;
  network?: boolean | undefined;
  mailbox?: boolean | undefined;
  max_runs_per_hour?: number | undefined;
  enabled?: boolean | undefined;
}

type KeyView = Awaited<ReturnType<KeysService['get']>>;

/**
 * Hosted agents: deploy (code sealed, a bounded key minted for the agent and its secret sealed, never shown),
 * list, gate, triggers and delete (the key and its subtree revoked, the sealed code and key secret deleted with
 * the row, its runs and mailbox with it). Owns the agents tables; keys are the keys module's.
 */
export class AgentsService {
  constructor(private readonly d: AgentsDeps) {}

  async deploy(accountId: string, input: DeployInput) {
    if (!LANGUAGES.includes(input.language)) throw invalid(`language: one of ${LANGUAGES.join(', ')}`, 'language');
    const codeBytes = Buffer.byteLength(input.code);
    if (codeBytes > MAX_CODE_BYTES) throw new ServiceError('payload_too_large', `code: an agent's program is limited to ${MAX_CODE_BYTES} bytes`, { param: 'code' });
    const timeout = input.timeout_seconds ?? DEFAULT_TIMEOUT_SECONDS;
    if (timeout > this.d.sandbox.maxTimeoutSeconds) throw invalid(`timeout_seconds: at most ${this.d.sandbox.maxTimeoutSeconds} on this deployment`, 'timeout_seconds');
    if (input.network && !this.d.sandbox.networkAllowed) throw invalid('network: this deployment does not allow network access from sandboxes', 'network');
    const now = this.d.clock.now();
    const schedule = input.schedule ?? null;
    const next = schedule === null ? null : checkSchedule(schedule, now);
    const parent = input.parent_key_id === undefined ? null : await this.parentOf(accountId, input.parent_key_id);
    const id = newId('agt_');
    const row = await this.d.db.transaction().execute(async (trx) => {
      // Deploys of one account run one at a time from here, so the limit holds under concurrency.
      await this.d.identity.lockAccount(trx, accountId);
      const n = await agentCount(trx, accountId);
      if (n >= MAX_AGENTS) {
        throw new ServiceError('conflict', `An account holds at most ${MAX_AGENTS} agents and this one holds ${n}; delete one (DELETE /v1/agents/:id) first`, { reason: 'agent_limit', limit: MAX_AGENTS });
      }
      const keyInput = {
        name: `Agent: ${input.name}`.slice(0, 100),
        scopes: input.scopes?.length ? input.scopes : DEFAULT_AGENT_SCOPES,
        // A delegated key without a cap of its own takes what its parent has left (keys.delegate), if the parent is capped.
        spend_cap_micro_usd: input.spend_cap_micro_usd ?? (parent?.spendCapMicroUsd != null ? undefined : DEFAULT_AGENT_CAP_MICRO_USD),
        managed_by: 'agent' as const,
      };
      const key = parent ? await this.d.keys.delegate(parent, keyInput, trx) : await this.d.keys.create(accountId, keyInput, trx);
      return insertAgent(trx, {
        id,
        account_id: accountId,
        name: input.name,
        language: input.language,
        code_sealed: this.d.sealer.seal(input.code, codeAad(id)),
        code_sha256: sha256Hex(input.code),
        code_bytes: codeBytes,
        key_id: key.id,
        key_sealed: this.d.sealer.seal(key.key, keyAad(id)),
        timeout_seconds: timeout,
        network: input.network ?? false,
        schedule,
        next_run_at: next,
        enabled: input.enabled ?? true,
        mailbox_trigger: input.mailbox ?? false,
        max_runs_per_hour: input.max_runs_per_hour ?? DEFAULT_MAX_RUNS_PER_HOUR,
        hook_token_hash: null,
        hook_created_at: null,
        hook_secret_sealed: null,
        last_run_id: null,
        last_run_at: null,
        last_run_status: null,
        created_at: now,
        updated_at: now,
      });
    });
    return this.view(row, await this.d.keys.get(accountId, row.key_id));
  }

  async list(accountId: string) {
    const rows = await listAgents(this.d.db, accountId);
    const keys = await this.d.keys.getMany(accountId, rows.map((r) => r.key_id));
    return rows.map((r) => this.view(r, keys.get(r.key_id)));
  }

  /** Enables or disables the agent; enabling moves a schedule's next run to its next time from now. */
  async gate(accountId: string, id: string, enabled: boolean) {
    const a = await agentOf(this.d.db, accountId, id);
    const now = this.d.clock.now();
    const next = enabled && !a.enabled && a.schedule ? nextRunOf(a.schedule, now) : a.next_run_at;
    const row = await updateAgent(this.d.db, id, { enabled, next_run_at: next, updated_at: now });
    return this.view(row, await this.d.keys.get(accountId, row.key_id));
  }

  async setTriggers(accountId: string, id: string, t: { mailbox?: boolean | undefined; max_runs_per_hour?: number | undefined }) {
    const a = await agentOf(this.d.db, accountId, id);
    const row = await updateAgent(this.d.db, id, { mailbox_trigger: t.mailbox ?? a.mailbox_trigger, max_runs_per_hour: t.max_runs_per_hour ?? a.max_runs_per_hour, updated_at: this.d.clock.now() });
    return this.view(row, await this.d.keys.get(accountId, row.key_id));
  }

  /** Revokes the agent key and its subtree, and deletes the agent: sealed code, key secret, runs and mailbox. */
  async remove(accountId: string, id: string) {
    const res = await this.d.db.transaction().execute(async (trx) => {
      const a = await agentOf(trx, accountId, id, true);
      const r = await this.d.keys.revokeWithin(trx, accountId, a.key_id);
      await deleteAgent(trx, id);
      return { id, object: 'agent' as const, deleted: true as const, key_id: a.key_id, revoked_ids: r.revoked_ids };
    });
    await this.d.keys.accountChanged(accountId); // no process keeps the key cached as live
    return res;
  }

  async runs(accountId: string, id: string) {
    const a = await agentOf(this.d.db, accountId, id);
    return { agent_id: a.id, runs: (await listRuns(this.d.db, a.id)).map(runView) };
  }

  async run(accountId: string, id: string, runId: string) {
    const a = await agentOf(this.d.db, accountId, id);
    return runView(await runOf(this.d.db, a.id, runId));
  }

  /** The parent key of a delegated agent key: one of the account's, active. */
  private async parentOf(accountId: string, keyId: string) {
    const v = await this.d.keys.get(accountId, keyId).catch((e: unknown) => {
      if (e instanceof ServiceError && e.type === 'not_found') throw invalid(`parent_key_id: this account has no API key ${keyId}`, 'parent_key_id');
      throw e;
    });
    if (v.status !== 'active') throw invalid(`parent_key_id: the API key ${keyId} is ${v.status}`, 'parent_key_id');
    return this.d.keys.principalOf(keyId);
  }

  private view(r: AgentRow, key: KeyView | undefined) {
    return {
      id: r.id,
      object: 'agent' as const,
      name: r.name,
      language: r.language,
      code_sha256: r.code_sha256,
      code_bytes: r.code_bytes,
      enabled: r.enabled,
      schedule: r.schedule,
      next_run_at: r.enabled ? (r.next_run_at?.toISOString() ?? null) : null,
      timeout_seconds: r.timeout_seconds,
      network: r.network,
      triggers: {
        mailbox: r.mailbox_trigger,
        max_runs_per_hour: r.max_runs_per_hour,
        hook: { enabled: r.hook_token_hash !== null, created_at: r.hook_created_at?.toISOString() ?? null, signed: r.hook_secret_sealed !== null },
      },
      key: {
        id: r.key_id,
        prefix: key?.prefix ?? null,
        status: key?.status ?? 'revoked',
        scopes: key?.scopes ?? [],
        spend_cap_micro_usd: key?.spend_cap_micro_usd ?? null,
        spent_micro_usd: key?.subtree_spent_micro_usd ?? 0,
      },
      run_count: r.run_count,
      last_run: r.last_run_id ? { id: r.last_run_id, at: r.last_run_at?.toISOString() ?? null, status: r.last_run_status } : null,
      created_at: r.created_at.toISOString(),
    };
  }
}

export function runView(r: RunRow) {
  const payload = r.receipt_canonical ? (JSON.parse(r.receipt_canonical) as Record<string, unknown>) : null;
  return {
    id: r.id,
    object: 'agent.run' as const,
    agent_id: r.agent_id,
    trigger: r.trigger,
    status: r.status,
    cost_micro_usd: r.cost_micro_usd,
    exit_code: r.exit_code,
    duration_ms: r.duration_ms,
    input_bytes: r.input_bytes,
    error: r.error_type ? { type: r.error_type, message: r.error_message ?? '' } : null,
    request_id: r.request_id,
    receipt:
      r.receipt_id && payload
        ? { id: r.receipt_id, hash: r.receipt_hash!, signature: r.receipt_signature!, signer: String(payload.signer ?? ''), canonical: r.receipt_canonical!, payload }
        : null,
    created_at: r.created_at.toISOString(),
    started_at: r.started_at?.toISOString() ?? null,
    ended_at: r.ended_at?.toISOString() ?? null,
  };
}
