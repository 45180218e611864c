import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { ENFORCED_BILLING, fundedKey, startTestGateway, type TestGateway } from './gateway.ts';
import { startUpstream, type TestUpstream } from './upstream.ts';

/**
 * The inference tests' setup: a gateway with billing enforced whose provider is a real OpenAI-compatible
 * server on loopback (`startUpstream`), a funded account and the official `openai` and `@anthropic-ai/sdk`
 * clients on its key. Prices: 2 micro-USD per input token, 5 per output token, so a charge is checkable by hand.
 */
export const IN = 2_000_000;
export const OUT = 5_000_000;
export const FUND = 10_000_000;

export interface InferenceEnv {
  up: TestUpstream;
  t: TestGateway;
  acct: { accountId: string; key: string };
  oa: OpenAI;
  an: Anthropic;
}

/** `env`: more of the gateway's configuration (a breaker limit, say). */
export async function startInferenceEnv(env: Record<string, string> = {}): Promise<InferenceEnv> {
  const up = await startUpstream();
  const t = await startTestGateway({
    env: {
      ...env,
      ...ENFORCED_BILLING,
      SVC_INFERENCE_TIMEOUT_SECONDS: '3',
      SVC_PROVIDERS: JSON.stringify([
        {
          name: 'local',
          base_url: up.url,
          api_key: 'sk-upstream-test',
          models: [
            { id: 'test-chat', input_micro_usd_per_mtok: IN, output_micro_usd_per_mtok: OUT, max_output_tokens: 1000 },
            { id: 'test-embed', input_micro_usd_per_mtok: 1_000_000, embedding: true },
          ],
        },
        // The same server as a provider whose chat endpoint reads the bound from max_completion_tokens (OpenAI's own API).
        { name: 'local-openai', base_url: up.url, output_limit_field: 'max_completion_tokens', models: [{ id: 'test-reasoning', input_micro_usd_per_mtok: IN, output_micro_usd_per_mtok: OUT, max_output_tokens: 1000 }] },
      ]),
      SVC_NODE_MODEL_PRICES: JSON.stringify({ 'node-only': { input_micro_usd_per_mtok: 1, output_micro_usd_per_mtok: 1 } }),
    },
  });
  const acct = await fundedKey(t, FUND);
  const oa = new OpenAI({ apiKey: acct.key, baseURL: `${t.url}/v1`, maxRetries: 0 });
  const an = new Anthropic({ authToken: acct.key, apiKey: null, baseURL: t.url, maxRetries: 0 });
  return { up, t, acct, oa, an };
}

export async function closeInferenceEnv(e: Partial<InferenceEnv>): Promise<void> {
  await e.t?.close();
  await e.up?.close();
}

/** A stored receipt's payload, once the write-behind settles committed (answers come before their commit). */
export async function storedReceipt(t: TestGateway, id: string) {
  await t.gw.services.metering.settledAll();
  const row = await t.gw.database.db.selectFrom('receipts').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
  return JSON.parse(row.payload) as { cost_micro_usd: number; model: string; units: { input_tokens: number; output_tokens: number }; detail: Record<string, unknown>; route: string };
}

export const user = (content: string) => [{ role: 'user' as const, content }];
