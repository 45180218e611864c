import { z } from 'zod';
import { ServiceError, verifyReceipt, type Clock } from '@svc/shared';
import type { Kysely } from 'kysely';
import type { DB } from '../../../db/schema.ts';
import type { Metering } from '../../money/metering.ts';
import { checkReceipt } from '../../proofs/integrity.ts';
import { Receipts } from '../../proofs/receipts.ts';
import { withoutNul } from '../../../http/fields.ts';
import type { McpTool, ToolAnswer } from './registry.ts';

const VerifyInput = z.object({
  receipt_id: withoutNul(z.string().min(1).max(128)).optional().describe('One of your receipts, by request id or usage-event id: its stored text, hash and signature are checked.'),
  receipt: z
    .union([z.string().max(256 * 1024), z.record(z.string(), z.unknown())])
    .optional()
    .describe('A receipt payload to check instead: the object, its canonical JSON text, or that text in base64url (the x-svc-receipt header).'),
  signature: z.string().max(200).optional().describe('The 0x EIP-191 signature that goes with `receipt`.'),
});

/**
 * Checks a receipt against the gateway's signer: one of the caller's stored receipts (canonical text, hash
 * and signature recomputed), or a payload and signature given. Metered at no cost, so the check itself is
 * a usage event with a receipt of its own (kind `mcp_tool`).
 */
export function verifyTool(d: { db: Kysely<DB>; clock: Clock; metering: Metering; signer: string; publicBase: string }): McpTool<typeof VerifyInput> {
  const receipts = new Receipts(d.db, d.clock, d.signer, d.publicBase);

  async function check(accountId: string, args: z.infer<typeof VerifyInput>): Promise<Record<string, unknown>> {
    if (args.receipt_id !== undefined) {
      if (args.receipt !== undefined || args.signature !== undefined) throw new ServiceError('invalid_request', 'Give receipt_id, or receipt and signature, not both', { param: 'receipt_id' });
      await d.metering.settled(accountId); // a receipt this caller was just answered with is committed before it is read
      const row = await receipts.owned(accountId, args.receipt_id);
      const c = checkReceipt(row, d.signer);
      return { receipt_id: row.id, valid: c.valid, canonical: c.canonical, hash_matches: c.hash, signature_valid: c.signature, recovered_address: c.recovered_address, signer: d.signer, kind: row.kind, payload: c.payload };
    }
    if (args.receipt === undefined || args.signature === undefined) throw new ServiceError('invalid_request', 'Give receipt_id, or receipt and signature', { param: 'receipt' });
    const v = verifyReceipt(args.receipt, args.signature, d.signer);
    return { valid: v.valid, recovered_address: v.recovered_address, signer: d.signer, payload: v.payload ?? null };
  }

  return {
    name: 'verify_receipt',
    title: 'Verify a receipt',
    description: 'Check a receipt\'s EIP-191 signature against the gateway\'s receipt signer: one of yours by id, or a payload and signature. Free, and receipted like every call.',
    inputSchema: VerifyInput,
    annotations: { readOnlyHint: true, idempotentHint: true, openWorldHint: false },
    async run(args, ctx): Promise<ToolAnswer> {
      const { result, receipt } = await d.metering.meter(
        { principal: ctx.principal, requestId: ctx.requestId, runId: ctx.runId, maxCostMicroUsd: 0, route: ctx.route, resource: ctx.resource },
        async () => {
          const r = await check(ctx.principal.accountId, args);
          return { result: r, usage: { costMicroUsd: 0, kind: 'mcp_tool', units: { calls: 1 }, detail: { tool: 'verify_receipt', valid: r.valid === true } } };
        },
      );
      const valid = result.valid === true;
      return {
        content: [{ type: 'text', text: valid ? `Valid: signed by the gateway's receipt signer ${d.signer}.` : `Not valid: the signature does not recover to the gateway's receipt signer ${d.signer}.` }],
        structuredContent: result,
        receipt,
      };
    },
  };
}
