import { sql, type Kysely } from 'kysely';
import type { DB } from '../../db/schema.ts';

/** The routes callers reach chat models by (their own traffic, not the gateway's evaluations of it). */
export const CHAT_ROUTES = ['POST /v1/chat/completions', 'POST /v1/messages', 'POST /v1/responses'] as const;

export interface ChatSpend {
  /** The engine build's slug the calls named (from the receipt's `engine` stamp); null for a catalog model called directly. */
  slug: string | null;
  /** The catalog model that served them. */
  model: string;
  requests: number;
  costMicroUsd: number;
  inputTokens: number;
  outputTokens: number;
}

/**
 * An account's metered chat traffic since a time, from its usage events and their receipts, per engine slug
 * and catalog model, dearest first (autopilot reads it to find where a cheaper configuration would serve).
 */
export async function chatSpend(db: Kysely<DB>, accountId: string, since: Date): Promise<ChatSpend[]> {
  const rows = await db
    .selectFrom('usage_events as e')
    .innerJoin('receipts as r', 'r.id', 'e.receipt_id')
    .select([
      sql<string | null>`(r.payload::jsonb -> 'engine' ->> 'slug')`.as('slug'),
      'e.model',
      sql<string>`count(*)`.as('requests'),
      sql<string>`sum(e.cost_micro_usd)`.as('cost'),
      sql<string>`sum(coalesce((e.units ->> 'input_tokens')::bigint, 0))`.as('input_tokens'),
      sql<string>`sum(coalesce((e.units ->> 'output_tokens')::bigint, 0))`.as('output_tokens'),
    ])
    .where('e.account_id', '=', accountId)
    .where('e.kind', '=', 'inference')
    .where('e.created_at', '>=', since)
    .where('e.route', 'in', [...CHAT_ROUTES])
    .where('e.model', 'is not', null)
    .groupBy([sql`1`, 'e.model'])
    .orderBy(sql`sum(e.cost_micro_usd)`, 'desc')
    .execute();
  return rows.map((r) => ({ slug: r.slug, model: r.model!, requests: Number(r.requests), costMicroUsd: Number(r.cost), inputTokens: Number(r.input_tokens), outputTokens: Number(r.output_tokens) }));
}
