import type { Kysely } from 'kysely';
import { ServiceError, newId, type Clock } from '@svc/shared';
import type { DB } from '../../db/schema.ts';
import type { Mode } from './scanner.ts';
import type { RuleSetConfig } from './compile.ts';
import { decodeFindings } from './findings.ts';
import type { GuardrailInput } from './schemas.ts';
import { countGuardrails, deleteGuardrail, guardrailsOf, insertGuardrail, listGuardrails, lockAccount, newestReceipts, type GuardrailRow } from './store.ts';

export const GUARDRAIL_PREFIX = 'gr_';
/** Rule sets per account (spec: document 3, Limits). */
export const MAX_GUARDRAILS = 200;

const notFound = () => new ServiceError('not_found', 'Guardrail rule set not found');

/**
 * Guardrail rule sets: detectors (pii, secrets, prompt_injection, blocklist), each with an action per
 * direction. Keys carry them through a policy (policies module), which the inference routes enforce
 * (enforce.ts); findings are read back from the account's signed receipts. Owns guardrails.
 */
export class GuardrailsService {
  constructor(
    private readonly db: Kysely<DB>,
    private readonly clock: Clock,
    readonly mode: Mode,
    /** Tells every process that keys of the account changed (KeysService.accountChanged): their policies are compiled again. */
    private readonly changed: (accountId: string) => Promise<void>,
  ) {}

  private view(r: Pick<GuardrailRow, 'id' | 'name' | 'detectors' | 'created_at'>) {
    return { id: r.id, object: 'guardrail' as const, name: r.name, detectors: r.detectors as unknown as Array<Record<string, unknown>>, created_at: r.created_at.toISOString() };
  }

  async create(accountId: string, input: GuardrailInput) {
    const row = { id: newId(GUARDRAIL_PREFIX), account_id: accountId, name: input.name ?? null, detectors: input.detectors, created_at: this.clock.now() };
    await this.db.transaction().execute(async (trx) => {
      await lockAccount(trx, accountId);
      if ((await countGuardrails(trx, accountId)) >= MAX_GUARDRAILS) {
        throw new ServiceError('conflict', `An account holds at most ${MAX_GUARDRAILS} guardrail rule sets; delete one first`, { reason: 'guardrail_limit', limit: MAX_GUARDRAILS });
      }
      await insertGuardrail(trx, { ...row, detectors: JSON.stringify(input.detectors) });
    });
    return this.view(row as never);
  }

  async list(accountId: string) {
    return { guardrails: (await listGuardrails(this.db, accountId, MAX_GUARDRAILS)).map((r) => this.view(r)), mode: this.mode };
  }

  /** Deletes a rule set: policies that name it skip it from now on, in every process (their keys' cache entries are dropped). */
  async remove(accountId: string, id: string) {
    if (!(await deleteGuardrail(this.db, accountId, id))) throw notFound();
    await this.changed(accountId);
    return { id, object: 'guardrail' as const, deleted: true as const };
  }

  /** The account's live rule sets among `ids`, as compile.ts takes them. */
  async ruleSets(accountId: string, ids: readonly string[], db: Kysely<DB> = this.db): Promise<RuleSetConfig[]> {
    return (await guardrailsOf(db, accountId, ids)).map((r) => ({ id: r.id, detectors: r.detectors }));
  }

  async findings(accountId: string, limit: number) {
    const decoded = decodeFindings(await newestReceipts(this.db, accountId, limit));
    return {
      events: decoded.events,
      enforced: this.mode === 'enforce',
      scanned_receipts: limit,
      blocked: decoded.blocked,
      totals: decoded.totals,
      note: `Findings decoded from the signed payloads of your newest ${limit} receipts (each finding is a count per rule, direction and category; matched text is never recorded). Guardrails mode: ${this.mode}.`,
    };
  }
}
