import { createHash } from 'node:crypto';
import { expect } from 'vitest';
import canonicalize from 'canonicalize';
import { RECEIPT_HEADERS } from '@svc/shared';
import { SvcClient } from '@svc/shared/client';
import type { TestGateway } from './gateway.ts';

/** Notary receipts for the proof and report tests, checked with libraries independent of the gateway's code. */

// Independent of the gateway's own code: the `canonicalize` package (RFC 8785) and node's sha256.
export const jcs = (v: unknown) => canonicalize(v) as string;
export const sha = (s: string) => `0x${createHash('sha256').update(s).digest('hex')}`;
export const digest = (n: number) => n.toString(16).padStart(64, '0');

export type Payload = Record<string, any> & { run: { id: string; seq: number; prev: string | null } | null };
export interface Notarized {
  id: string;
  canonical: string;
  signature: string;
  payload: Payload;
}
export interface ReceiptBody {
  id: string;
  usage_event_id: string;
  kind: string;
  payload: Payload;
  canonical: string;
  hash: string;
  signature: string;
  signer: string;
  run_id: string | null;
  run_seq: number | null;
  prev_hash: string | null;
  shared: boolean;
  created_at: string;
}
export interface RunBody {
  id: string;
  receipt_count: number;
  total_cost_micro_usd: number;
  head_hash: string;
  first_at: string;
  last_at: string;
  receipts: Array<{ id: string; seq: number; kind: string; hash: string; prev_hash: string | null; payload: Payload; canonical: string; signature: string }>;
}
export type Signed<K extends string, T> = { [k in K]: T } & { signature: `0x${string}`; signer: string; canonical: string; scheme: string };
export type ProofBody = Signed<
  'proof',
  { run_id: string; account_id: string; head_hash: string; receipt_count: number; total_cost_micro_usd: number; span: { first_at: string; last_at: string; seconds: number }; chain_valid: boolean; failures: string[]; anchor: { state: string }; generated_at: string }
>;

/** A signed-in account with a key client, credited `micro` micro-USD. */
export async function notaryAccount(t: TestGateway, micro = 1_000_000) {
  const s = await t.signIn();
  if (micro > 0) await t.gw.services.metering.credit(s.accountId, micro, 'grant', `proofs-${s.accountId}`);
  const key = await s.client.createKey();
  return { ...s, api: new SvcClient({ baseUrl: t.url, credential: { kind: 'key', token: key.key } }) };
}

let seqNo = 0;
/** Registers one notary receipt (in `run` when given) and returns it as the response headers carried it. */
export async function notarize(api: SvcClient, run?: string): Promise<Notarized> {
  const n = ++seqNo * 2;
  const res = await api.raw('POST', '/v1/notary/receipts', {
    body: { input_sha256: digest(n), output_sha256: digest(n + 1), label: 'private label text' },
    headers: run ? { 'x-svc-run-id': run } : {},
  });
  expect(res.status, await res.clone().text()).toBe(201);
  const canonical = Buffer.from(res.headers.get(RECEIPT_HEADERS.payload)!, 'base64url').toString('utf8');
  const id = res.headers.get('x-request-id')!;
  expect(res.headers.get(RECEIPT_HEADERS.id)).toBe(id);
  return { id, canonical, signature: res.headers.get(RECEIPT_HEADERS.signature)!, payload: JSON.parse(canonical) };
}
