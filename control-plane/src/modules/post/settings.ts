import type { Kysely } from 'kysely';
import { invalid, type Clock } from '@svc/shared';
import type { DB } from '../../db/schema.ts';
import { handleProblem } from '../passports/handles.ts';

/** The postage cap (spec document 3, Limits): $1.00. */
export const MAX_POSTAGE_MICRO_USD = 1_000_000;
/** Handles one allow or block list holds. */
export const MAX_LIST = 500;
export const ACCEPT_POLICIES = ['open', 'allowlist', 'closed'] as const;
export type AcceptPolicy = (typeof ACCEPT_POLICIES)[number];

export interface Settings {
  postage_micro_usd: number;
  accept_policy: AcceptPolicy;
  allow_list: string[];
  block_list: string[];
}

export interface SettingsInput {
  postage_micro_usd?: number | undefined;
  accept_policy?: AcceptPolicy | undefined;
  allow_list?: string[] | undefined;
  block_list?: string[] | undefined;
}

/** An account that never set anything takes mail from anyone, free. */
export const DEFAULTS: Settings = { postage_micro_usd: 0, accept_policy: 'open', allow_list: [], block_list: [] };

/**
 * Whether a recipient's settings take mail from `senderHandle`: the block list refuses first; under
 * `allowlist` only listed senders; `closed` takes none. The caller answers every refusal alike (403) so the
 * lists are not revealed.
 */
export function accepts(s: Settings, senderHandle: string): boolean {
  if (s.block_list.includes(senderHandle)) return false;
  if (s.accept_policy === 'closed') return false;
  if (s.accept_policy === 'allowlist') return s.allow_list.includes(senderHandle);
  return true;
}

function checkList(list: string[], param: string): string[] {
  if (list.length > MAX_LIST) throw invalid(`${param}: at most ${MAX_LIST} handles`, param);
  const out: string[] = [];
  for (const [i, raw] of list.entries()) {
    const h = raw.trim().toLowerCase();
    const problem = handleProblem(h);
    if (problem) throw invalid(`${param}[${i}]: ${problem}`, `${param}[${i}]`);
    if (!out.includes(h)) out.push(h);
  }
  return out;
}

/** Agent Post settings per account (post_settings). */
export class PostSettings {
  constructor(
    private readonly db: Kysely<DB>,
    private readonly clock: Clock,
  ) {}

  async get(accountId: string, db: Kysely<DB> = this.db, lock = false): Promise<Settings> {
    let q = db.selectFrom('post_settings').selectAll().where('account_id', '=', accountId);
    if (lock) q = q.forUpdate();
    const row = await q.executeTakeFirst();
    if (!row) return { ...DEFAULTS, allow_list: [], block_list: [] };
    return { postage_micro_usd: row.postage_micro_usd, accept_policy: row.accept_policy, allow_list: JSON.parse(row.allow_list) as string[], block_list: JSON.parse(row.block_list) as string[] };
  }

  /** Updates any subset; postage above $1.00, an unknown policy or a malformed handle is a 400 naming the field, nothing written. */
  async put(accountId: string, input: SettingsInput): Promise<Settings> {
    const p = input.postage_micro_usd;
    if (p !== undefined && (!Number.isSafeInteger(p) || p < 0)) throw invalid('postage_micro_usd: a whole number of micro-USD, zero or more', 'postage_micro_usd');
    if (p !== undefined && p > MAX_POSTAGE_MICRO_USD) throw invalid(`postage_micro_usd: at most ${MAX_POSTAGE_MICRO_USD} ($1.00)`, 'postage_micro_usd');
    const allow = input.allow_list === undefined ? undefined : checkList(input.allow_list, 'allow_list');
    const block = input.block_list === undefined ? undefined : checkList(input.block_list, 'block_list');
    return this.db.transaction().execute(async (trx) => {
      const cur = await this.get(accountId, trx, true);
      const next: Settings = {
        postage_micro_usd: p ?? cur.postage_micro_usd,
        accept_policy: input.accept_policy ?? cur.accept_policy,
        allow_list: allow ?? cur.allow_list,
        block_list: block ?? cur.block_list,
      };
      const row = { postage_micro_usd: next.postage_micro_usd, accept_policy: next.accept_policy, allow_list: JSON.stringify(next.allow_list), block_list: JSON.stringify(next.block_list), updated_at: this.clock.now() };
      await trx
        .insertInto('post_settings')
        .values({ account_id: accountId, ...row })
        .onConflict((oc) => oc.column('account_id').doUpdateSet(row))
        .execute();
      return next;
    });
  }
}
