import type { Kysely } from 'kysely';
import { ServiceError, type Clock } from '@svc/shared';
import type { DB } from '../../db/schema.ts';
import type { KeyPolicy } from '../../http/auth-types.ts';
import { compileRuleSets, type CompiledRules } from '../guardrails/compile.ts';
import type { GuardrailsService } from '../guardrails/service.ts';
import type { Mode } from '../guardrails/scanner.ts';
import { contentOf, digestOf, policyId, type PolicyContent, type PolicyInput } from './content.ts';

/**
 * A live policy as a key's requests enforce it: cached with the key's credentials (KeysService asks
 * `active` when it loads a key that names a policy) and dropped with them when the account's keys, rule sets
 * or policies change.
 */
export interface ActivePolicy extends KeyPolicy {
  id: string;
  sha256: string;
  models: string[] | null;
  maxOutputTokens: number | null;
  /** The policy's rule sets that still exist, compiled per direction. */
  rules: CompiledRules;
  /** The deployment's SVC_GUARDRAILS_MODE. */
  mode: Mode;
  ruleSetIds: string[];
}

export interface AttachedPolicy {
  id: string;
  sha256: string;
  content: PolicyContent;
}

const notFound = () => new ServiceError('not_found', 'Policy not found');
const CACHE_MAX = 10_000;

/**
 * Policies: a key's constraints (guardrail rule sets, models, output limit), attached where keys are minted
 * and stored once per distinct content per account. Other modules that mint keys (mandates, ghost sessions)
 * call `attach` and pass the id to KeysService as `policy_id`. Owns policies.
 */
export class PoliciesService {
  private readonly cache = new Map<string, { accountId: string; value: Promise<ActivePolicy | null> }>();

  constructor(
    private readonly db: Kysely<DB>,
    private readonly clock: Clock,
    private readonly guardrails: GuardrailsService,
    /** Tells every process that keys of the account changed (KeysService.accountChanged). */
    private readonly changed: (accountId: string) => Promise<void>,
  ) {}

  /** The sha256 of a live policy of the account, or null (revoked, or not the account's). */
  async liveDigest(accountId: string, id: string): Promise<string | null> {
    return (await this.contentOf(this.db, accountId, id))?.sha256 ?? null;
  }

  /** The content of a live policy of the account, or null. */
  private async contentOf(db: Kysely<DB>, accountId: string, id: string): Promise<{ sha256: string; content: PolicyContent } | null> {
    const row = await db.selectFrom('policies').select(['sha256', 'canonical']).where('id', '=', id).where('account_id', '=', accountId).where('revoked_at', 'is', null).executeTakeFirst();
    return row ? { sha256: row.sha256, content: JSON.parse(row.canonical) as PolicyContent } : null;
  }

  /**
   * The policy a new key carries: `input` as given, or added to the parent key's live policy (a delegated
   * key). Every rule set it names must be a live one of the account (400 naming the field otherwise, nothing
   * written). Stored once per content: attaching the same content again returns the same policy. Inside the
   * caller's transaction when `db` is one.
   */
  async attach(accountId: string, input: PolicyInput, parentPolicyId: string | null = null, db: Kysely<DB> = this.db): Promise<AttachedPolicy> {
    const own = await this.guardrails.ruleSets(accountId, input.guardrails, db);
    const i = input.guardrails.findIndex((g) => !own.some((s) => s.id === g));
    if (i >= 0) throw new ServiceError('invalid_request', `policy.guardrails[${i}]: no guardrail rule set ${input.guardrails[i]} on this account`, { param: `policy.guardrails[${i}]` });
    let parent: PolicyContent | null = null;
    if (parentPolicyId) {
      const p = await this.contentOf(db, accountId, parentPolicyId);
      if (p) {
        // Rule sets deleted since run unconstrained by them already: they are not carried over.
        const live = await this.guardrails.ruleSets(accountId, p.content.guardrails, db);
        parent = { ...p.content, guardrails: p.content.guardrails.filter((g) => live.some((s) => s.id === g)) };
      }
    }
    const content = contentOf(input, parent);
    const { canonical, sha256 } = digestOf(content);
    const live = await db.selectFrom('policies').select('id').where('account_id', '=', accountId).where('sha256', '=', sha256).where('revoked_at', 'is', null).executeTakeFirst();
    if (live) return { id: live.id, sha256, content };
    const earlier = await db.selectFrom('policies').select((eb) => eb.fn.countAll<number>().as('n')).where('account_id', '=', accountId).where('sha256', '=', sha256).executeTakeFirstOrThrow();
    const generation = Number(earlier.n);
    const id = policyId(accountId, sha256, generation);
    const inserted = await db
      .insertInto('policies')
      .values({ id, account_id: accountId, sha256, canonical, generation, created_at: this.clock.now(), revoked_at: null })
      .onConflict((oc) => oc.doNothing())
      .returning('id')
      .executeTakeFirst();
    if (inserted) return { id, sha256, content };
    // Attached at the same moment by another request: that one's.
    const again = await db.selectFrom('policies').select('id').where('account_id', '=', accountId).where('sha256', '=', sha256).where('revoked_at', 'is', null).executeTakeFirstOrThrow();
    return { id: again.id, sha256, content };
  }

  private view(r: { id: string; sha256: string; canonical: string; created_at: Date }) {
    const c = JSON.parse(r.canonical) as PolicyContent;
    return { id: r.id, object: 'policy' as const, sha256: r.sha256, canonical: r.canonical, guardrails: c.guardrails, models: c.models ?? null, max_output_tokens: c.max_output_tokens ?? null, created_at: r.created_at.toISOString() };
  }

  /** The account's live policies, newest first (no cap). */
  async list(accountId: string) {
    const rows = await this.db.selectFrom('policies').select(['id', 'sha256', 'canonical', 'created_at']).where('account_id', '=', accountId).where('revoked_at', 'is', null).orderBy('seq', 'desc').execute();
    return { policies: rows.map((r) => this.view(r)) };
  }

  /** Revokes a policy: keys carrying it run unconstrained and their receipts lose the stamp, in every process at once. */
  async revoke(accountId: string, id: string) {
    const now = this.clock.now();
    const row = await this.db.updateTable('policies').set({ revoked_at: now }).where('id', '=', id).where('account_id', '=', accountId).where('revoked_at', 'is', null).returning(['id']).executeTakeFirst();
    if (!row) throw notFound();
    await this.changed(accountId);
    return { id, object: 'policy' as const, revoked: true as const, revoked_at: now.toISOString() };
  }

  /** The live policy a key names, compiled (null when it was revoked). Cached until the account's keys change. */
  active(accountId: string, id: string): Promise<ActivePolicy | null> {
    const hit = this.cache.get(id);
    if (hit && hit.accountId === accountId) return hit.value;
    if (this.cache.size >= CACHE_MAX) this.cache.clear();
    const value = this.load(accountId, id);
    this.cache.set(id, { accountId, value });
    value.catch(() => this.cache.delete(id));
    return value;
  }

  private async load(accountId: string, id: string): Promise<ActivePolicy | null> {
    const p = await this.contentOf(this.db, accountId, id);
    if (!p) return null;
    const sets = await this.guardrails.ruleSets(accountId, p.content.guardrails);
    return {
      stamp: { id, sha256: p.sha256 },
      id,
      sha256: p.sha256,
      models: p.content.models ?? null,
      maxOutputTokens: p.content.max_output_tokens ?? null,
      rules: compileRuleSets(p.content.guardrails.map((g) => sets.find((s) => s.id === g)).filter((s) => s !== undefined)),
      ruleSetIds: sets.map((s) => s.id),
      mode: this.guardrails.mode,
    };
  }

  /** Drops compiled policies with the keys' cache (KeysService.onChange): a key id, or "account:<id>". */
  invalidate(target: string): void {
    if (!target.startsWith('account:')) return;
    const account = target.slice(8);
    for (const [id, e] of this.cache) if (e.accountId === account) this.cache.delete(id);
  }
}
