import type { Kysely } from 'kysely';
import { Sealer, ServiceError, invalid, newId, notFound, receiptHash, type Clock, type SignedReceipt } from '@svc/shared';
import type { DB } from '../../db/schema.ts';
import type { KeyPrincipal } from '../../http/auth-types.ts';
import type { Anchors, AnchorField } from '../anchors/service.ts';
import { chatUnderKey, failureOf, isCallerRefusal, outputBound, type ModelCallDeps } from '../evals/model-call.ts';
import type { ReceiptSigner } from '../money/signer.ts';
import { fingerprint, summarizeEvidence, type EvidenceSummary } from './evidence.ts';
import { JUROR_SYSTEM, jurorPrompt, readVote } from './jurors.ts';
import type { PublishInput, VerdictInput } from './schemas.ts';
import { insertVerdict, verdictCounts, listVerdicts, markPublished, markUnpublished, ownedVerdict, publishedVerdict, type VerdictMeta, type VerdictRow } from './store.ts';
import { DECISION_RULE, tallyVotes } from './tally.ts';

/** The anchor kind of a verdict's signed outcome (the leaf is the outcome's hash). */
export const ANCHOR_KIND = 'verdict';
export const VERDICT_ROUTE = 'POST /v1/judge/verdicts';

export const TRUST_MODEL =
  'A verdict\'s signed outcome fixes which juror models were asked, the options, the evidence root (each label with the sha256 of its content), ' +
  'every vote and every abstention with its reason, the tally, and sha256 fingerprints of the question and of each rationale, as of its signature ' +
  '(and, once its batch is anchored, no later than the anchoring block). Each juror answered through this gateway\'s metered path under the ' +
  'calling key: its receipt is signed too. Question and rationales are not kept unless the verdict is published, when they are re-supplied, ' +
  'checked against the fingerprints and sealed; unpublishing destroys them. A verdict proves what the jurors answered, not that they are right, ' +
  'nor that the evidence is true or complete (only its hashes are signed), nor that the account asked no other question it never published.';

/** One juror as the signed outcome records it. */
export interface JurorRecord {
  model: string;
  vote: string | null;
  abstained: boolean;
  abstain_reason: string | null;
  rationale_sha256: string | null;
  receipt_id: string | null;
  receipt_hash: string | null;
  cost_micro_usd: number;
}

/** The signed outcome's payload. */
export interface VerdictPayload {
  v: 1;
  id: string;
  kind: 'judge_verdict';
  verdict_id: string;
  account_id: string;
  key_id: string;
  route: string;
  models: string[];
  options: string[];
  question_sha256: string;
  evidence: EvidenceSummary;
  jurors: JurorRecord[];
  tally: Array<{ option: string; votes: number }>;
  abstentions: number;
  outcome: string | null;
  decision_rule: string;
  jurors_cost_micro_usd: number;
  cost_micro_usd: 0;
  created_at: string;
  signer: string;
}

export interface JudgeDeps {
  db: Kysely<DB>;
  clock: Clock;
  signer: ReceiptSigner;
  sealKey: Uint8Array;
  anchors: Anchors;
  calls: ModelCallDeps;
  publicUrl: URL;
}

const verdictNotFound = () => notFound('Verdict');

/**
 * Judge verdicts: one question with options over labeled evidence, asked of 1 to 5 juror models, each an
 * in-process chat completion under the calling key (metered and receipted like any of its calls). A juror
 * whose call fails, or whose answer is not a JSON vote for one option with a rationale, abstains with the
 * reason. The outcome (models, evidence root, votes, tally, fingerprints of question and rationales, the
 * jurors' receipts) is signed by the gateway's receipt signer, not billed itself, and queued for the public
 * anchors. Question and rationales are returned once; publishing re-supplies them (checked against the
 * fingerprints) to be sealed and served publicly; unpublishing destroys them.
 */
export class JudgeService {
  private readonly sealer: Sealer;
  private readonly base: string;

  constructor(private readonly d: JudgeDeps) {
    this.sealer = new Sealer(d.sealKey);
    this.base = d.publicUrl.href.replace(/\/+$/, '');
  }
  /** For the explorer: signed verdicts, and how many are published (one query). */
  explorerSource() {
    return {
      counts: async () => {
        const c = await verdictCounts(this.d.db);
        return { verdicts: c.all, published_verdicts: c.published };
      },
    };
  }


  /** The most tokens a juror of `model` may answer with: the asked bound, within the model's own. */
  private async jurorBound(model: string, asked: number, param: string): Promise<number> {
    try {
      return await outputBound(this.d.calls, model, asked);
    } catch (e) {
      if (e instanceof ServiceError && (e.type === 'not_found' || e.type === 'invalid_request')) throw invalid(`${param}: ${e.message}`, param);
      throw e;
    }
  }

  async create(p: KeyPrincipal, input: VerdictInput, ctx: { requestId: string }) {
    if (!p.scopes.includes('inference')) {
      throw new ServiceError('insufficient_scope', 'Each juror is a chat completion of this key: it needs the "inference" scope as well', { required_scope: 'inference' });
    }
    const bounds = await Promise.all(input.models.map((m, i) => this.jurorBound(m, input.max_tokens, `models[${i}]`)));
    const evidence = summarizeEvidence(input.evidence);
    const prompt = jurorPrompt(input.question, input.options, input.evidence);
    const answers = await Promise.all(
      input.models.map(async (model, i) => {
        const body = { model, messages: [{ role: 'system', content: JUROR_SYSTEM }, { role: 'user', content: prompt }], max_tokens: bounds[i], temperature: input.temperature };
        try {
          const a = await chatUnderKey(this.d.calls, p, body, { route: VERDICT_ROUTE, checkChatRoute: false });
          const read = readVote(a.text, input.options);
          return { model, receipt: a.receipt, read, error: null };
        } catch (e) {
          return { model, receipt: null, read: null, error: e };
        }
      }),
    );
    // Every juror refused for the key's own reasons (out of credit, spend cap, frozen, bounds): no verdict, that refusal.
    if (answers.every((a) => isCallerRefusal(a.error))) throw answers[0]!.error as ServiceError;

    const jurors: Array<JurorRecord & { rationale: string | null; receipt: SignedReceipt | null }> = answers.map((a) => {
      const base = { model: a.model, receipt_id: a.receipt?.payload.id ?? null, receipt_hash: a.receipt?.hash ?? null, cost_micro_usd: a.receipt?.payload.cost_micro_usd ?? 0, receipt: a.receipt };
      if (a.error !== null) {
        const f = failureOf(a.error);
        return { ...base, vote: null, abstained: true, abstain_reason: `call failed: ${f.type}: ${f.message}`, rationale_sha256: null, rationale: null };
      }
      if (typeof a.read === 'string' || a.read === null) return { ...base, vote: null, abstained: true, abstain_reason: `out of format: ${a.read ?? 'no answer'}`, rationale_sha256: null, rationale: null };
      return { ...base, vote: a.read.vote, abstained: false, abstain_reason: null, rationale_sha256: fingerprint(a.read.rationale), rationale: a.read.rationale };
    });
    const t = tallyVotes(input.options, jurors.map((j) => j.vote));
    const id = newId('vrd_');
    const now = this.d.clock.now();
    const payload: Omit<VerdictPayload, 'signer'> = {
      v: 1,
      id: ctx.requestId,
      kind: 'judge_verdict',
      verdict_id: id,
      account_id: p.accountId,
      key_id: p.keyId,
      route: VERDICT_ROUTE,
      models: input.models,
      options: input.options,
      question_sha256: fingerprint(input.question),
      evidence,
      jurors: jurors.map(({ rationale: _r, receipt: _x, ...j }) => j),
      ...t,
      decision_rule: DECISION_RULE,
      jurors_cost_micro_usd: jurors.reduce((n, j) => n + j.cost_micro_usd, 0),
      cost_micro_usd: 0,
      created_at: now.toISOString(),
    };
    const signed = this.d.signer.signDocument({ ...payload, signer: this.d.signer.address });
    const row = await insertVerdict(this.d.db, {
      id,
      account_id: p.accountId,
      key_id: p.keyId,
      state: 'unpublished',
      models: JSON.stringify(input.models),
      options: JSON.stringify(input.options),
      evidence_root: evidence.root,
      question_sha256: payload.question_sha256,
      outcome: t.outcome,
      receipt_id: ctx.requestId,
      receipt_payload: signed.canonical,
      receipt_hash: receiptHash(signed.canonical),
      receipt_signature: signed.signature,
      question_sealed: null,
      rationales_sealed: null,
      created_at: now,
    });
    // Queued once stored; any later read queues it again should this process die in between.
    const anchor = await this.d.anchors.track(ANCHOR_KIND, id, row.receipt_hash);
    const view = this.view(row, anchor);
    return {
      ...view,
      question: input.question,
      jurors: view.jurors.map((j, i) => ({
        ...j,
        rationale: jurors[i]!.rationale,
        receipt: jurors[i]!.receipt ? { id: jurors[i]!.receipt!.payload.id, payload: jurors[i]!.receipt!.payload as unknown as Record<string, unknown>, canonical: jurors[i]!.receipt!.canonical, hash: jurors[i]!.receipt!.hash, signature: jurors[i]!.receipt!.signature } : null,
      })),
    };
  }

  async list(accountId: string, limit: number) {
    const rows = await listVerdicts(this.d.db, accountId, limit);
    const anchors = await this.d.anchors.fields(ANCHOR_KIND, rows.map((r) => ({ ref: r.id, hash: r.receipt_hash })), true);
    return { verdicts: rows.map((r, i) => this.view(r, anchors[i]!)), trust_model: TRUST_MODEL };
  }

  async get(accountId: string, id: string) {
    const row = await ownedVerdict(this.d.db, accountId, id);
    if (!row) throw verdictNotFound();
    return this.view(row, await this.d.anchors.track(ANCHOR_KIND, row.id, row.receipt_hash));
  }

  /**
   * Publishes a verdict of the account: the question and rationales re-supplied must hash to the signed
   * fingerprints (else 400 naming the field that differs, and nothing changes); they are then sealed and served
   * publicly. Publishing again (with the same content, necessarily) is harmless.
   */
  async publish(accountId: string, id: string, input: PublishInput) {
    const row = await ownedVerdict(this.d.db, accountId, id);
    if (!row) throw verdictNotFound();
    const payload = JSON.parse(row.receipt_payload) as VerdictPayload;
    const mismatch = (param: string, what: string) =>
      new ServiceError('invalid_request', `${param}: ${what}; publish the question and rationales exactly as the verdict returned them`, { param, reason: 'fingerprint_mismatch' });
    if (fingerprint(input.question) !== payload.question_sha256) throw mismatch('question', 'its sha256 is not the signed question_sha256');
    if (input.rationales.length !== payload.jurors.length) throw mismatch('rationales', `the verdict has ${payload.jurors.length} jurors and ${input.rationales.length} rationales were given`);
    payload.jurors.forEach((j, i) => {
      const r = input.rationales[i] ?? null;
      if (j.rationale_sha256 === null && r !== null) throw mismatch(`rationales[${i}]`, 'this juror abstained and gave no rationale: send null');
      if (j.rationale_sha256 !== null && (r === null || fingerprint(r) !== j.rationale_sha256)) throw mismatch(`rationales[${i}]`, "its sha256 is not the juror's signed rationale_sha256");
    });
    const published = await markPublished(
      this.d.db,
      accountId,
      id,
      { question: this.sealer.seal(input.question, `${id}:question`), rationales: this.sealer.seal(JSON.stringify(input.rationales), `${id}:rationales`) },
      this.d.clock.now(),
    );
    if (!published) throw verdictNotFound();
    return this.publicOf(published);
  }

  /** Closes the public page and destroys the sealed question and rationales; idempotent. */
  async unpublish(accountId: string, id: string) {
    const row = await markUnpublished(this.d.db, accountId, id, this.d.clock.now());
    if (!row) throw verdictNotFound();
    return this.view(row, await this.d.anchors.track(ANCHOR_KIND, row.id, row.receipt_hash));
  }

  /** A published verdict with its question and rationales; unknown and unpublished ids are the same 404. */
  async publicView(id: string) {
    const row = await publishedVerdict(this.d.db, id);
    if (!row) throw verdictNotFound();
    return this.publicOf(row);
  }

  private async publicOf(row: VerdictRow) {
    if (!row.question_sealed || !row.rationales_sealed) throw new Error(`verdict ${row.id} is published without its sealed content`);
    const question = this.sealer.open(row.question_sealed, `${row.id}:question`).toString('utf8');
    const rationales = JSON.parse(this.sealer.open(row.rationales_sealed, `${row.id}:rationales`).toString('utf8')) as Array<string | null>;
    const view = this.view(row, await this.d.anchors.track(ANCHOR_KIND, row.id, row.receipt_hash));
    return { ...view, question, jurors: view.jurors.map((j, i) => ({ ...j, rationale: rationales[i] ?? null })), trust_model: TRUST_MODEL };
  }

  links(id: string) {
    const e = encodeURIComponent(id);
    return { public_url: `${this.base}/v1/judge/public/${e}`, page_url: `${this.base}/j/${e}` };
  }

  private view(row: VerdictMeta, anchor: AnchorField) {
    const payload = JSON.parse(row.receipt_payload) as VerdictPayload;
    return {
      id: row.id,
      object: 'judge_verdict' as const,
      state: row.state,
      models: payload.models,
      options: payload.options,
      question_sha256: payload.question_sha256,
      evidence: payload.evidence,
      jurors: payload.jurors,
      tally: payload.tally,
      abstentions: payload.abstentions,
      outcome: payload.outcome,
      decision_rule: payload.decision_rule,
      receipt: { id: row.receipt_id, payload: payload as unknown as Record<string, unknown>, canonical: row.receipt_payload, hash: row.receipt_hash, signature: row.receipt_signature, signer: payload.signer },
      anchor,
      created_at: row.created_at.toISOString(),
      published_at: row.published_at?.toISOString() ?? null,
      unpublished_at: row.unpublished_at?.toISOString() ?? null,
      ...this.links(row.id),
    };
  }
}
