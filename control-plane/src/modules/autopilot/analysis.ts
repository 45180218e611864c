import { ServiceError, invalid, type Clock } from '@svc/shared';
import type { Kysely } from 'kysely';
import type { DB } from '../../db/schema.ts';
import type { KeyPrincipal } from '../../http/auth-types.ts';
import type { EngineService } from '../engine/service.ts';
import type { ModelCallDeps } from '../evals/model-call.ts';
import type { EvalsService } from '../evals/service.ts';
import type { SuiteRow } from '../evals/store.ts';
import type { ModelCatalog } from '../inference/catalog.ts';
import { chatSpend } from '../money/chat-spend.ts';
import type { ReplayService } from '../replay/service.ts';
import { matchCapsule, scoreSuite, suiteRegression, type SuiteScore } from './evaluate.ts';
import { MAX_TARGETS, type AnalyzeInput } from './schemas.ts';
import { cheaperModels, targetsOf, type Configuration, type PricedModel, type Target } from './targets.ts';

const DEFAULT_SUITES = 5;
const DEFAULT_CAPSULES = 10;

export interface AnalysisDeps {
  db: Kysely<DB>;
  clock: Clock;
  catalog: ModelCatalog;
  engine: EngineService;
  evals: EvalsService;
  replay: ReplayService;
  calls: ModelCallDeps;
}

interface Capsule {
  id: string;
  request: Record<string, unknown>;
  baseline: string;
}

/** One evaluated (target, candidate): what a proposal row is made of. */
export interface Evaluated {
  target: Target;
  buildId: string | null;
  current: PricedModel;
  candidate: PricedModel;
  evidence: Record<string, unknown> & { regression: boolean };
}

export interface AnalysisResult {
  from: Date;
  to: Date;
  targets: Target[];
  evaluated: Evaluated[];
  skipped: Array<{ kind: Target['kind']; target: string; reason: string }>;
  cost: number;
}

const priceView = (m: PricedModel) => ({ model: m.model, input_micro_usd_per_mtok: m.price.inputMicroUsdPerMtok, output_micro_usd_per_mtok: m.price.outputMicroUsdPerMtok, projected_micro_usd: m.projected });
const scoreView = (s: SuiteScore) => ({ model: s.model, pass_rate: s.pass_rate, passed_attempts: s.passed_attempts, attempts: s.attempts, cost_micro_usd: s.cost_micro_usd });

/**
 * An analysis: the account's metered chat traffic of the window per target (dearest first); for each target
 * its current configuration, the cheaper catalog models, and both evaluated on the account's suites and
 * capsules through the metered path under the analysing key. Stores nothing.
 */
export class Analysis {
  constructor(private readonly d: AnalysisDeps) {}

  /** The suites and capsules the caller named, checked before any billed call (400 naming the entry). */
  async named(accountId: string, input: AnalyzeInput): Promise<{ suites: SuiteRow[] | null; capsules: Capsule[] | null }> {
    let suites: SuiteRow[] | null = null;
    let capsules: Capsule[] | null = null;
    if (input.suite_ids) {
      suites = [];
      for (const [i, id] of input.suite_ids.entries()) {
        try {
          suites.push(await this.d.evals.suite(accountId, id));
        } catch (e) {
          if (e instanceof ServiceError && e.type === 'not_found') throw invalid(`suite_ids[${i}]: the account has no eval suite ${id}`, `suite_ids[${i}]`);
          throw e;
        }
      }
    }
    if (input.capsule_ids) {
      capsules = [];
      for (const [i, id] of input.capsule_ids.entries()) capsules.push(await this.capsule(accountId, id, `capsule_ids[${i}]`));
    }
    return { suites, capsules };
  }

  private async capsule(accountId: string, id: string, param: string): Promise<Capsule> {
    try {
      const { capsule, request } = await this.d.replay.request(accountId, id);
      return { id, request, baseline: capsule.output_sha256 };
    } catch (e) {
      if (e instanceof ServiceError && (e.type === 'not_found' || e.type === 'gone')) throw invalid(`${param}: ${e.message}`, param);
      throw e;
    }
  }

  async run(accountId: string, p: KeyPrincipal, input: AnalyzeInput, named: { suites: SuiteRow[] | null; capsules: Capsule[] | null }): Promise<AnalysisResult> {
    const to = this.d.clock.now();
    const from = new Date(to.getTime() - input.window_days * 86_400_000);
    const targets = targetsOf(await chatSpend(this.d.db, accountId, from));
    const out: AnalysisResult = { from, to, targets, evaluated: [], skipped: [], cost: 0 };
    for (const t of targets.slice(0, MAX_TARGETS)) {
      const skip = (reason: string) => void out.skipped.push({ kind: t.kind, target: t.name, reason });
      let cfg: Configuration;
      let buildId: string | null = null;
      if (t.kind === 'engine') {
        try {
          const b = await this.d.engine.served(accountId, t.name);
          cfg = { model: b.row.model, systemPrompt: b.systemPrompt, parameters: b.row.parameters };
          buildId = b.row.id;
        } catch (e) {
          if (e instanceof ServiceError && e.type === 'not_found') {
            skip('not_published: no version of the slug is published now');
            continue;
          }
          throw e;
        }
      } else cfg = { model: t.key, systemPrompt: null, parameters: {} };
      const priced = await cheaperModels(this.d.catalog, t, cfg.model, input.max_candidates);
      if (!priced) {
        skip(`not_in_catalog: ${cfg.model} is not a chat model of the catalog now`);
        continue;
      }
      if (!priced.candidates.length) {
        skip(`no_cheaper_model: no chat model of the catalog costs less than ${cfg.model} for this traffic`);
        continue;
      }
      const suites = named.suites ?? (await this.defaultSuites(accountId, cfg.model));
      const capsules = named.capsules ?? (await this.defaultCapsules(accountId, t.name));
      if (!suites.length && !capsules.length) {
        skip('no_evidence: no eval suite of its model and no live replay capsule of it to evaluate on (name suite_ids or capsule_ids)');
        continue;
      }
      const base = await this.score(p, cfg, suites, capsules, input.repeat);
      out.cost += base.cost;
      for (const cand of priced.candidates) {
        const c = await this.score(p, { ...cfg, model: cand.model }, suites, capsules, input.repeat);
        out.cost += c.cost;
        out.evaluated.push({ target: t, buildId, current: priced.current, candidate: cand, evidence: this.evidence(t, input, from, to, priced.current, cand, suites, capsules, base, c) });
      }
    }
    return out;
  }

  private async defaultSuites(accountId: string, model: string): Promise<SuiteRow[]> {
    const ids = (await this.d.evals.list(accountId)).evals.filter((s) => s.model === model).slice(0, DEFAULT_SUITES).map((s) => s.id);
    return Promise.all(ids.map((id) => this.d.evals.suite(accountId, id)));
  }

  private async defaultCapsules(accountId: string, name: string): Promise<Capsule[]> {
    const live = (await this.d.replay.list(accountId)).capsules.filter((c) => !c.request_destroyed && (c.model === name || c.model.startsWith(`${name}@`))).slice(0, DEFAULT_CAPSULES);
    return Promise.all(live.map((c) => this.capsule(accountId, c.id, 'capsule')));
  }

  /** One configuration over the suites (each case `repeat` times) and the capsules. */
  private async score(p: KeyPrincipal, cfg: Configuration, suites: SuiteRow[], capsules: Capsule[], repeat: number) {
    const suiteScores: SuiteScore[] = [];
    for (const s of suites) suiteScores.push(await scoreSuite(this.d.calls, p, s, cfg, repeat));
    const matches: boolean[] = [];
    let cost = suiteScores.reduce((n, s) => n + s.cost_micro_usd, 0);
    for (const c of capsules) {
      const m = await matchCapsule(this.d.calls, p, c.request, c.baseline, cfg);
      matches.push(m.matched);
      cost += m.cost;
    }
    return { suites: suiteScores, matches, cost };
  }

  private evidence(t: Target, input: AnalyzeInput, from: Date, to: Date, current: PricedModel, cand: PricedModel, suites: SuiteRow[], capsules: Capsule[], base: Awaited<ReturnType<Analysis['score']>>, c: Awaited<ReturnType<Analysis['score']>>) {
    const suiteEvidence = suites.map((s, i) => {
      const r = suiteRegression(base.suites[i]!, c.suites[i]!);
      return { suite_id: s.id, name: s.name, cases: (s.cases as unknown[]).length, repeat: input.repeat, baseline: scoreView(base.suites[i]!), candidate: scoreView(c.suites[i]!), regressed_cases: r.regressed, regression: r.regression };
    });
    const baseMatches = base.matches.filter(Boolean).length;
    const candMatches = c.matches.filter(Boolean).length;
    const capsuleRegression = candMatches < baseMatches || base.matches.some((m, i) => m && !c.matches[i]);
    const savings = current.projected - cand.projected;
    return {
      usage: { window_days: input.window_days, from: from.toISOString(), to: to.toISOString(), requests: t.requests, cost_micro_usd: t.costMicroUsd, input_tokens: t.inputTokens, output_tokens: t.outputTokens },
      costs: { current: priceView(current), candidate: priceView(cand), savings_micro_usd: savings, savings_percent: current.projected > 0 ? Math.round((savings / current.projected) * 10_000) / 100 : 0 },
      suites: suiteEvidence,
      capsules: {
        samples: c.matches.length,
        baseline_matches: baseMatches,
        candidate_matches: candMatches,
        results: c.matches.map((m, i) => ({ capsule_id: capsules[i]!.id, baseline_matched: base.matches[i]!, candidate_matched: m })),
        regression: capsuleRegression,
      },
      sample_size: { suite_attempts: c.suites.reduce((n, s) => n + s.attempts, 0), capsules: c.matches.length },
      evaluation_cost_micro_usd: c.cost,
      regression: suiteEvidence.some((s) => s.regression) || capsuleRegression,
    };
  }
}
