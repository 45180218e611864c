import type { Kysely } from 'kysely';
import { notFound } from '@svc/shared';
import type { DB } from '../../db/schema.ts';
import type { KeyPrincipal } from '../../http/auth-types.ts';
import type { Metering, Settled } from '../money/metering.ts';
import type { Anchors } from '../anchors/service.ts';

export interface NotaryInput {
  input_sha256: string;
  output_sha256: string;
  label?: string | undefined;
}

const ROUTE = 'POST /v1/notary/receipts';

/**
 * The notary registers fingerprints of work done elsewhere and signs an anchorable receipt for them,
 * billed per receipt. A registration is its receipt (kind `notary`), so there is no second table. The
 * receipt's hash is queued for the public anchors when it is minted (and again on any read, should the
 * process have died in between).
 */
export class NotaryService {
  constructor(
    private readonly db: Kysely<DB>,
    private readonly metering: Metering,
    private readonly priceMicroUsd: number,
    private readonly anchors: Anchors,
  ) {}

  async register(p: KeyPrincipal, input: NotaryInput, ctx: { requestId: string; runId: string | null; resource: string }): Promise<Settled> {
    const { result: _r, ...settled } = await this.metering.meter(
      { principal: p, requestId: ctx.requestId, runId: ctx.runId, maxCostMicroUsd: this.priceMicroUsd, route: ROUTE, resource: ctx.resource },
      async () => ({
        result: null,
        usage: {
          costMicroUsd: this.priceMicroUsd,
          kind: 'notary',
          units: { receipts: 1 },
          detail: { input_sha256: input.input_sha256.toLowerCase(), output_sha256: input.output_sha256.toLowerCase(), label: input.label ?? null },
        },
      }),
    );
    await this.anchors.enqueue('notary', settled.receipt.payload.id, settled.receipt.hash);
    return settled;
  }

  async view(r: { id: string; payload: string; hash: string; signature: string; created_at: Date }) {
    return (await this.views([r]))[0]!;
  }

  private async views(rows: Array<{ id: string; payload: string; hash: string; signature: string; created_at: Date }>) {
    const anchors = await this.anchors.fields('notary', rows.map((r) => ({ ref: r.id, hash: r.hash })), true);
    return rows.map((r, i) => ({ ...this.fields(r), anchor: anchors[i]! }));
  }

  private fields(r: { id: string; payload: string; hash: string; signature: string; created_at: Date }) {
    const payload = JSON.parse(r.payload) as { detail?: { input_sha256: string; output_sha256: string; label: string | null }; cost_micro_usd: number; signer: string };
    return {
      id: r.id,
      object: 'notary.receipt' as const,
      input_sha256: payload.detail?.input_sha256 ?? '',
      output_sha256: payload.detail?.output_sha256 ?? '',
      label: payload.detail?.label ?? null,
      cost_micro_usd: payload.cost_micro_usd,
      created_at: r.created_at.toISOString(),
      receipt: { payload, hash: r.hash, signature: r.signature, signer: payload.signer },
    };
  }

  async list(accountId: string) {
    const rows = await this.db
      .selectFrom('receipts')
      .select(['id', 'payload', 'hash', 'signature', 'created_at'])
      .where('account_id', '=', accountId)
      .where('kind', '=', 'notary')
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .limit(200)
      .execute();
    return this.views(rows);
  }

  async get(accountId: string, id: string) {
    const r = await this.db
      .selectFrom('receipts')
      .select(['id', 'payload', 'hash', 'signature', 'created_at'])
      .where('account_id', '=', accountId)
      .where('kind', '=', 'notary')
      .where('id', '=', id)
      .executeTakeFirst();
    if (!r) throw notFound('Notary receipt');
    return this.view(r);
  }
}
