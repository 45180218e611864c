import type { Kysely } from 'kysely';
import { ServiceError, canonicalize, conflict, invalid, newId, notFound, sha256Hex, type Clock } from '@svc/shared';
import type { DB } from '../../db/schema.ts';
import type { SessionPrincipal } from '../../http/auth-types.ts';
import type { EngineService } from '../engine/service.ts';
import { inferenceKeyOf } from '../keys/inference-key.ts';
import type { KeysService } from '../keys/service.ts';
import { Analysis, type AnalysisDeps, type Evaluated } from './analysis.ts';
import { PROPOSALS_LISTED, type AnalyzeInput } from './schemas.ts';
import { decide, insertProposals, listProposals, ownedProposal, type ProposalRow } from './store.ts';

export interface AutopilotDeps extends AnalysisDeps {
  keys: KeysService;
}

const proposalNotFound = () => notFound('Autopilot proposal');
const iso = (d: Date | null) => (d ? d.toISOString() : null);
/** Who decided: the member acting for the account in an org session, else the account itself. */
const actor = (s: SessionPrincipal) => s.org?.memberAccountId ?? s.accountId;

/**
 * Autopilot: on request (opt-in, billed), reads the account's metered chat traffic and proposes cheaper
 * catalog models for its engine slugs and directly called models, each evaluated against the current
 * configuration on the account's own eval suites and replay capsules, with all evidence. A proposal whose
 * evidence says regression is never adopted, by anyone; otherwise adopting (org admins or the account's
 * owner; the org role table holds members back) publishes it as a new engine version. Owns autopilot_proposals.
 */
export class AutopilotService {
  private readonly analysis: Analysis;

  constructor(private readonly d: AutopilotDeps) {
    this.analysis = new Analysis(d);
  }

  async analyze(accountId: string, input: AnalyzeInput) {
    const p = await inferenceKeyOf(this.d.keys, accountId, input.key_id, 'key_id');
    const named = await this.analysis.named(accountId, input);
    const r = await this.analysis.run(accountId, p, input, named);
    const analysisId = newId('apa_');
    const now = this.d.clock.now();
    const rows = await this.d.db.transaction().execute((trx) => insertProposals(trx, r.evaluated.map((e) => this.row(accountId, analysisId, p.keyId, e, now))));
    return {
      object: 'autopilot.analysis' as const,
      id: analysisId,
      window: { from: r.from.toISOString(), to: r.to.toISOString(), days: input.window_days },
      usage: r.targets.map((t) => ({ kind: t.kind, target: t.name, requests: t.requests, cost_micro_usd: t.costMicroUsd, input_tokens: t.inputTokens, output_tokens: t.outputTokens })),
      proposals: rows.map((x) => this.view(x)),
      skipped: r.skipped,
      evaluation_cost_micro_usd: r.cost,
    };
  }

  private row(accountId: string, analysisId: string, keyId: string, e: Evaluated, now: Date) {
    return {
      id: newId('apr_'),
      account_id: accountId,
      analysis_id: analysisId,
      state: 'open' as const,
      target_kind: e.target.kind,
      target: e.target.key,
      build_id: e.buildId,
      current_model: e.current.model,
      candidate_model: e.candidate.model,
      regression: e.evidence.regression,
      savings_micro_usd: e.current.projected - e.candidate.projected,
      evidence: JSON.stringify(e.evidence),
      evidence_sha256: sha256Hex(canonicalize(e.evidence)),
      key_id: keyId,
      created_at: now,
      decided_at: null,
      decided_by: null,
      adopted_build_id: null,
    };
  }

  async list(accountId: string) {
    return { proposals: (await listProposals(this.d.db, accountId, PROPOSALS_LISTED)).map((r) => this.view(r)) };
  }

  async get(accountId: string, id: string) {
    const r = await ownedProposal(this.d.db, accountId, id);
    if (!r) throw proposalNotFound();
    return this.view(r);
  }

  /**
   * Publishes the candidate as a new engine version (an engine target: its build with the candidate model; a
   * model called directly: a new version of `slug`) and marks the proposal adopted, in one transaction.
   * Refused for everyone, without override, when the evidence says regression; idempotent once adopted.
   */
  async adopt(s: SessionPrincipal, id: string, slug: string | undefined) {
    const r = await ownedProposal(this.d.db, s.accountId, id);
    if (!r) throw proposalNotFound();
    if (r.state === 'adopted') return this.view(r);
    if (r.state === 'rejected') throw conflict(`Autopilot proposal ${id} was rejected; run a new analysis`);
    if (r.regression) {
      throw new ServiceError('conflict', `Autopilot proposal ${id} cannot be adopted: its evidence says regression (${r.candidate_model} did worse than ${r.current_model} on the account's suites or capsules). This refusal has no override.`, { reason: 'regression' });
    }
    let input;
    if (r.target_kind === 'engine') {
      if (slug !== undefined && slug !== r.target) throw invalid(`slug: this proposal is about engine/${r.target}; it is adopted as a new version of that slug`, 'slug');
      input = await this.d.engine.successorOf(s.accountId, r.build_id!, r.candidate_model);
    } else {
      if (slug === undefined) throw invalid(`slug: name the engine slug to publish ${r.candidate_model} under (the proposal is about ${r.target} called directly)`, 'slug');
      input = { slug, model: r.candidate_model };
    }
    const done = await this.d.db.transaction().execute(async (trx) => {
      const build = await this.d.engine.draft(s.accountId, input, { origin: 'autopilot', proposalId: id, publish: true, db: trx });
      const row = await decide(trx, id, { state: 'adopted', decided_at: this.d.clock.now(), decided_by: actor(s), adopted_build_id: build.id });
      if (!row) throw conflict(`Autopilot proposal ${id} was decided at the same moment by another request`);
      return row;
    });
    return this.view(done);
  }

  /** Closes an open proposal without adopting it; idempotent; 409 once adopted. */
  async reject(s: SessionPrincipal, id: string): Promise<ReturnType<AutopilotService['view']>> {
    const r = await ownedProposal(this.d.db, s.accountId, id);
    if (!r) throw proposalNotFound();
    if (r.state === 'rejected') return this.view(r);
    if (r.state === 'adopted') throw conflict(`Autopilot proposal ${id} was adopted; unpublish its build (${r.adopted_build_id}) to undo it`);
    const row = await decide(this.d.db, id, { state: 'rejected', decided_at: this.d.clock.now(), decided_by: actor(s) });
    if (!row) return this.reject(s, id);
    return this.view(row);
  }

  view(r: ProposalRow) {
    return {
      id: r.id,
      object: 'autopilot.proposal' as const,
      analysis_id: r.analysis_id,
      state: r.state,
      target: { kind: r.target_kind, name: r.target_kind === 'engine' ? `engine/${r.target}` : r.target, build_id: r.build_id },
      current_model: r.current_model,
      candidate_model: r.candidate_model,
      regression: r.regression,
      savings_micro_usd: Number(r.savings_micro_usd),
      evidence: r.evidence as never,
      evidence_sha256: r.evidence_sha256,
      key_id: r.key_id,
      created_at: r.created_at.toISOString(),
      decided_at: iso(r.decided_at),
      decided_by: r.decided_by,
      adopted_build_id: r.adopted_build_id,
    };
  }
}
