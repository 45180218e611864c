import type { Kysely } from 'kysely';
import { Sealer, ServiceError, conflict, invalid, newId, notFound, type Clock } from '@svc/shared';
import type { DB } from '../../db/schema.ts';
import type { EngineParameters } from '../../db/schema-engine.ts';
import type { KeyPrincipal } from '../../http/auth-types.ts';
import { guardRequest } from '../guardrails/enforce.ts';
import type { ModelCatalog } from '../inference/catalog.ts';
import { isEngineModel, type EngineExpander, type EngineExpansion } from '../inference/engine-model.ts';
import type { PoliciesService } from '../policies/service.ts';
import { BUILDS_CAP, type DraftInput } from './schemas.ts';
import { engineName, parseEngineModel, promptDigest, specOf, validSlug, SLUG_RULE } from './spec.ts';
import { countBuilds, insertBuild, listBuilds, lockEngine, nextVersion, ownedBuild, retirePublished, servedBuild, updateBuild, type BuildRow } from './store.ts';

export interface EngineDeps {
  db: Kysely<DB>;
  clock: Clock;
  sealKey: Uint8Array;
  catalog: ModelCatalog;
  policies: PoliciesService;
}

/** The configuration of one build, opened for a call made inside the gateway (autopilot's evaluations). */
export interface OpenedBuild {
  row: BuildRow;
  systemPrompt: string | null;
}

const buildNotFound = () => notFound('Engine build');
const PARAM_KEYS = ['temperature', 'top_p', 'max_tokens', 'tools', 'tool_choice'] as const;
const iso = (d: Date | null) => (d ? d.toISOString() : null);

/**
 * Engine builds: named configurations (model, sealed system prompt, parameters, guardrail policy) of an
 * account, drafted as numbered versions of a slug and called as `engine/<slug>` on the chat completions,
 * Messages and Responses routes. Publishing points the slug at one version, retiring the one before in the
 * same transaction; unpublishing retires it and its pins stop resolving. Deleting destroys the sealed prompt
 * and leaves the row, its hash and spec. Owns engine_builds.
 */
export class EngineService implements EngineExpander {
  private readonly sealer: Sealer;

  constructor(private readonly d: EngineDeps) {
    this.sealer = new Sealer(d.sealKey);
  }

  private aad = (id: string) => `engine_build:${id}`;

  /** The model a build names: a chat model of the catalog, never another build (400 naming `model`). */
  private async checkModel(model: string, maxTokens: number | undefined): Promise<void> {
    if (isEngineModel(model)) throw invalid('model: a build names a catalog model, not another engine build', 'model');
    let resolved;
    try {
      resolved = await this.d.catalog.resolve(model, 'chat');
    } catch (e) {
      if (e instanceof ServiceError && (e.type === 'not_found' || e.type === 'invalid_request')) throw invalid(`model: ${e.message}`, 'model');
      throw e;
    }
    const bound = resolved.provider?.price.maxOutputTokens ?? resolved.nodes?.price.maxOutputTokens ?? null;
    if (maxTokens !== undefined && bound !== null && maxTokens > bound) throw invalid(`max_tokens: the model "${model}" produces at most ${bound} tokens`, 'max_tokens');
  }

  /**
   * Drafts a new version of a slug (the next number), or with `publish` drafts and publishes it in one
   * transaction (an adopted autopilot proposal). Nothing is written on a refusal.
   */
  async draft(accountId: string, input: DraftInput, opts: { origin?: 'api' | 'autopilot'; proposalId?: string; publish?: boolean; db?: Kysely<DB> } = {}) {
    await this.checkModel(input.model, input.max_tokens);
    let policy: { id: string; sha256: string } | null = null;
    if (input.guardrail_policy_id) {
      const sha256 = await this.d.policies.liveDigest(accountId, input.guardrail_policy_id);
      if (!sha256) throw invalid(`guardrail_policy_id: no live policy ${input.guardrail_policy_id} on this account (GET /v1/policies)`, 'guardrail_policy_id');
      policy = { id: input.guardrail_policy_id, sha256 };
    }
    const parameters: EngineParameters = {};
    for (const k of PARAM_KEYS) if (input[k] !== undefined) (parameters as Record<string, unknown>)[k] = input[k];
    const promptSha = input.system_prompt === undefined ? null : promptDigest(input.system_prompt);
    const { canonical, sha256 } = specOf({ guardrail_policy: policy, model: input.model, parameters, slug: input.slug, system_prompt_sha256: promptSha });
    const id = newId('eng_');
    const now = this.d.clock.now();
    const write = async (trx: Kysely<DB>) => {
      await lockEngine(trx, accountId);
      const n = await countBuilds(trx, accountId);
      if (n >= BUILDS_CAP) throw new ServiceError('conflict', `An account holds at most ${BUILDS_CAP} engine build versions and this one holds ${n}`, { reason: 'build_limit', limit: BUILDS_CAP });
      const version = await nextVersion(trx, accountId, input.slug);
      if (opts.publish) await retirePublished(trx, accountId, input.slug, id, now);
      return insertBuild(trx, {
        id,
        account_id: accountId,
        slug: input.slug,
        version,
        state: opts.publish ? 'published' : 'draft',
        model: input.model,
        parameters: JSON.stringify(parameters),
        system_prompt_sealed: input.system_prompt === undefined ? null : this.sealer.seal(input.system_prompt, this.aad(id)),
        system_prompt_sha256: promptSha,
        policy_id: policy?.id ?? null,
        policy_sha256: policy?.sha256 ?? null,
        spec_canonical: canonical,
        spec_sha256: sha256,
        origin: opts.origin ?? 'api',
        proposal_id: opts.proposalId ?? null,
        created_at: now,
        published_at: opts.publish ? now : null,
        retired_at: null,
        deleted_at: null,
      });
    };
    const row = opts.db ? await write(opts.db) : await this.d.db.transaction().execute(write);
    return this.view(row);
  }

  async list(accountId: string, slug?: string) {
    return { builds: (await listBuilds(this.d.db, accountId, slug, BUILDS_CAP)).map((r) => this.view(r)) };
  }

  async get(accountId: string, id: string) {
    const row = await ownedBuild(this.d.db, accountId, id);
    if (!row) throw buildNotFound();
    return this.view(row);
  }

  /** Destroys the sealed prompt (a published build is retired with it); the row, hash and spec stay. Idempotent. */
  async remove(accountId: string, id: string) {
    const now = this.d.clock.now();
    const row = await this.d.db.transaction().execute(async (trx) => {
      await lockEngine(trx, accountId);
      const b = await ownedBuild(trx, accountId, id, true);
      if (!b) throw buildNotFound();
      if (b.deleted_at) return b;
      return updateBuild(trx, id, { system_prompt_sealed: null, deleted_at: now, ...(b.state === 'published' ? { state: 'retired' as const, retired_at: now } : {}) });
    });
    return this.view(row);
  }

  /** Points `engine/<slug>` at this version, retiring the version it pointed at, atomically. Idempotent; 409 once deleted. */
  async publish(accountId: string, id: string) {
    const now = this.d.clock.now();
    const row = await this.d.db.transaction().execute(async (trx) => {
      await lockEngine(trx, accountId);
      const b = await ownedBuild(trx, accountId, id, true);
      if (!b) throw buildNotFound();
      if (b.deleted_at) throw new ServiceError('conflict', `Engine build ${id} was deleted (its system prompt is destroyed); draft a new version to publish`, { reason: 'build_deleted' });
      if (b.state === 'published') return b;
      await retirePublished(trx, accountId, b.slug, id, now);
      return updateBuild(trx, id, { state: 'published', published_at: now, retired_at: null });
    });
    return this.view(row);
  }

  /** Retires a published version: `engine/<slug>` and its pin stop resolving. Idempotent for a retired one; 409 for a draft. */
  async unpublish(accountId: string, id: string) {
    const now = this.d.clock.now();
    const row = await this.d.db.transaction().execute(async (trx) => {
      await lockEngine(trx, accountId);
      const b = await ownedBuild(trx, accountId, id, true);
      if (!b) throw buildNotFound();
      if (b.state === 'retired') return b;
      if (b.state === 'draft') throw conflict(`Engine build ${id} is a draft: it was never published`);
      return updateBuild(trx, id, { state: 'retired', retired_at: now });
    });
    return this.view(row);
  }

  /** What `engine/<slug>` serves now: version, spec digest, configuration. 404 when no version is published. */
  async resolve(accountId: string, slug: string) {
    if (!validSlug(slug)) throw invalid(`slug: a slug is ${SLUG_RULE}`, 'slug');
    const b = await servedBuild(this.d.db, accountId, slug, null);
    if (!b) throw new ServiceError('not_found', `No version of engine/${slug} is published on this account`, { param: 'slug' });
    const live = b.policy_id ? (await this.d.policies.liveDigest(accountId, b.policy_id)) !== null : false;
    return {
      object: 'engine.resolution' as const,
      model_name: engineName(slug),
      slug,
      build_id: b.id,
      version: b.version,
      spec_sha256: b.spec_sha256,
      spec_canonical: b.spec_canonical,
      published_at: b.published_at!.toISOString(),
      configuration: { model: b.model, parameters: b.parameters, system_prompt_sha256: b.system_prompt_sha256, guardrail_policy: this.policyRef(b), guardrail_policy_live: live },
    };
  }

  /** The build a model name serves for the account (published; a pin: that version, only while published). */
  async served(accountId: string, model: string): Promise<OpenedBuild> {
    const { slug, version } = parseEngineModel(model);
    const b = await servedBuild(this.d.db, accountId, slug, version);
    if (!b) throw new ServiceError('not_found', `The model "${model}" does not exist: no published build of engine/${slug} on this account`, { param: 'model', code: 'engine_not_found' });
    if (b.state !== 'published') {
      throw new ServiceError('not_found', `The model "${model}" does not resolve: version ${b.version} of engine/${slug} is ${b.state === 'draft' ? 'a draft, never published' : 'retired'}`, { param: 'model', code: 'engine_not_published' });
    }
    return this.open(b);
  }

  /** A build with its prompt opened (a deleted build has none to open). */
  open(b: BuildRow): OpenedBuild {
    return { row: b, systemPrompt: b.system_prompt_sealed ? this.sealer.open(b.system_prompt_sealed, this.aad(b.id)).toString('utf8') : null };
  }

  /** The account's build, opened (autopilot). */
  async opened(accountId: string, id: string): Promise<OpenedBuild> {
    const b = await ownedBuild(this.d.db, accountId, id);
    if (!b) throw buildNotFound();
    return this.open(b);
  }

  /**
   * The draft of a new version that serves `model` with everything else of build `id` (an adopted autopilot
   * proposal): its slug, prompt and parameters, and its guardrail policy while that is live. 409 once the
   * build's prompt was destroyed.
   */
  async successorOf(accountId: string, id: string, model: string): Promise<DraftInput> {
    const { row, systemPrompt } = await this.opened(accountId, id);
    if (row.deleted_at) throw new ServiceError('conflict', `Engine build ${id} was deleted (its system prompt is destroyed): there is nothing to carry to a new version`, { reason: 'build_deleted' });
    const live = row.policy_id ? (await this.d.policies.liveDigest(accountId, row.policy_id)) !== null : false;
    return { slug: row.slug, model, ...row.parameters, ...(systemPrompt !== null ? { system_prompt: systemPrompt } : {}), ...(live ? { guardrail_policy_id: row.policy_id! } : {}) } as DraftInput;
  }

  /** The inference service's expansion of `engine/<slug>[@<version>]` (EngineExpander). */
  async expand(p: KeyPrincipal, body: Record<string, unknown>): Promise<EngineExpansion> {
    const { row, systemPrompt } = await this.served(p.accountId, String(body.model));
    const out = applyBuild(body, row.model, row.parameters);
    let guard;
    if (row.policy_id) {
      const policy = await this.d.policies.active(p.accountId, row.policy_id);
      // The build's policy scans what the caller sent (never the account's own sealed prompt).
      if (policy) guard = guardRequest({ ...p, policy }, 'chat.completions', out);
    }
    if (systemPrompt !== null) out.messages = [{ role: 'system', content: systemPrompt }, ...(out.messages as unknown[])];
    return { body: out, stamp: { build_id: row.id, slug: row.slug, spec_sha256: row.spec_sha256, version: row.version }, ...(guard ? { guard } : {}) };
  }

  private policyRef = (b: BuildRow) => (b.policy_id ? { id: b.policy_id, sha256: b.policy_sha256! } : null);

  view(b: BuildRow) {
    return {
      id: b.id,
      object: 'engine.build' as const,
      slug: b.slug,
      version: b.version,
      state: b.state,
      model_name: engineName(b.slug, b.version),
      model: b.model,
      parameters: b.parameters,
      system_prompt_sha256: b.system_prompt_sha256,
      system_prompt_destroyed: b.deleted_at !== null,
      guardrail_policy: this.policyRef(b),
      spec: JSON.parse(b.spec_canonical),
      spec_canonical: b.spec_canonical,
      spec_sha256: b.spec_sha256,
      origin: b.origin,
      proposal_id: b.proposal_id,
      created_at: b.created_at.toISOString(),
      published_at: iso(b.published_at),
      retired_at: iso(b.retired_at),
      deleted_at: iso(b.deleted_at),
    };
  }
}

/**
 * A caller's chat body with a build's model and parameters: the build's parameters replace the caller's
 * (its max_tokens replaces max_completion_tokens too); every other field of the caller passes through.
 */
export function applyBuild(body: Record<string, unknown>, model: string, parameters: EngineParameters): Record<string, unknown> {
  const out: Record<string, unknown> = { ...body, model };
  for (const [k, v] of Object.entries(parameters)) out[k] = v;
  if (parameters.max_tokens !== undefined) delete out.max_completion_tokens;
  return out;
}
