import { expect } from 'vitest';
import OpenAI, { toFile } from 'openai';
import { verifyMessage } from 'ethers';
import { ENFORCED_BILLING, type TestGateway } from './gateway.ts';

/** Helpers of the files and batches tests: JSONL lines, the gateway's env, driving the batch loop. */
export const IN = 2_000_000; // micro-USD per million input tokens: 2 per token
export const OUT = 5_000_000; // 5 per output token
export const EMBED = 1_000_000; // 1 per input token

export function batchEnv(upstreamUrl: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    ...ENFORCED_BILLING,
    SVC_INFERENCE_TIMEOUT_SECONDS: '5',
    SVC_PROVIDERS: JSON.stringify([
      {
        name: 'local',
        base_url: upstreamUrl,
        models: [
          { id: 'test-chat', input_micro_usd_per_mtok: IN, output_micro_usd_per_mtok: OUT, max_output_tokens: 100 },
          { id: 'test-embed', input_micro_usd_per_mtok: EMBED, embedding: true },
        ],
      },
    ]),
    ...extra,
  };
}

export const chatLine = (id: string, content = `question ${id}`, model = 'test-chat') => ({
  custom_id: id,
  method: 'POST',
  url: '/v1/chat/completions',
  body: { model, messages: [{ role: 'user', content }] },
});
export const embedLine = (id: string, input: string) => ({ custom_id: id, method: 'POST', url: '/v1/embeddings', body: { model: 'test-embed', input, encoding_format: 'float' } });
export const jsonl = (lines: unknown[]) => lines.map((l) => JSON.stringify(l)).join('\n') + '\n';

export function sdk(t: TestGateway, apiKey: string): OpenAI {
  return new OpenAI({ apiKey, baseURL: `${t.url}/v1`, maxRetries: 0 });
}

export async function uploadLines(oa: OpenAI, lines: unknown[]) {
  return oa.files.create({ file: await toFile(Buffer.from(jsonl(lines)), 'batch.jsonl'), purpose: 'batch' });
}

/** A signed-in account with credit and an API key (all scopes unless given). */
export async function account(t: TestGateway, microUsd: number, scopes?: string[]) {
  const s = await t.signIn();
  if (microUsd > 0) await t.gw.services.metering.credit(s.accountId, microUsd, 'grant', `test-${s.accountId}`);
  const k = await s.client.createKey(scopes ? { scopes: scopes as never } : {});
  return { accountId: s.accountId, session: s.client, key: k.key, keyId: k.id, oa: sdk(t, k.key) };
}

const ENDED = ['completed', 'failed', 'expired', 'cancelled'];

/** Runs the leader's loops until the batch has ended (a bounded number of passes). */
export async function drain(t: TestGateway, oa: OpenAI, id: string, passes = 40): Promise<OpenAI.Batch> {
  for (let i = 0; i < passes; i++) {
    await t.gw.leader.runAllOnce();
    const b = await oa.batches.retrieve(id);
    if (ENDED.includes(b.status)) return b;
  }
  throw new Error(`batch ${id} did not end in ${passes} passes`);
}

export interface OutLine {
  id: string;
  custom_id: string | null;
  response: { status_code: number; request_id: string; body: any } | null;
  error: { code: string; message: string } | null;
  receipt: { id: string; cost_micro_usd: number; canonical: string; hash: string; signature: string; signer: string } | null;
}

export async function readLines(oa: OpenAI, fileId: string | null | undefined): Promise<OutLine[]> {
  if (!fileId) return [];
  const text = await (await oa.files.content(fileId)).text();
  expect(text.endsWith('\n')).toBe(true);
  return text.trimEnd().split('\n').map((l) => JSON.parse(l) as OutLine);
}

/** The line's receipt verifies (EIP-191 over its canonical JSON) and names its request; returns the payload. */
export function verified(l: OutLine, signer: string): { cost_micro_usd: number; route: string; units: Record<string, number>; detail: Record<string, unknown> } {
  expect(l.receipt).not.toBeNull();
  expect(verifyMessage(l.receipt!.canonical, l.receipt!.signature)).toBe(signer);
  expect(l.receipt!.signer).toBe(signer);
  const p = JSON.parse(l.receipt!.canonical);
  expect(p.id).toBe(l.response?.request_id ?? l.receipt!.id);
  expect(p.cost_micro_usd).toBe(l.receipt!.cost_micro_usd);
  return p;
}

export const discounted = (list: number, pct: number) => list - Math.floor((list * pct) / 100);
