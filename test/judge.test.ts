import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyMessage } from 'ethers';
import type { Browser, BrowserContext } from 'playwright-core';
import type { Scope } from '@svc/shared';
import { SvcClient } from '@svc/shared/client';
import { ENFORCED_BILLING, startTestGateway, type TestGateway } from './support/gateway.ts';
import { startScriptedUpstream, type ScriptedUpstream } from './support/scripted-upstream.ts';
import { launchChromium } from './support/browser.ts';
import { openPublicPage } from './support/public-page.ts';
import { call } from './support/call.ts';
import { buf, hex, mth, rootFromPath } from './support/merkle.ts';

/**
 * Judge verdicts end to end, against a local OpenAI-compatible server whose juror models the test scripts: a
 * three-juror verdict with one juror failing (its abstention recorded with the reason), every juror a metered
 * chat completion of the calling key with a signed receipt, the signed outcome verified with ethers against the
 * published signer, the evidence root recomputed here from the documented leaf encoding with an RFC 6962 tree
 * of the test's own, question and rationales returned once and not stored; publish (fingerprints checked),
 * the public record and the page /j/{id} verified in headless Chromium, unpublish (404, sealed columns null);
 * refusals of bad input that write nothing.
 */

let t: TestGateway;
let up: ScriptedUpstream;
let browser: Browser;
let context: BrowserContext;
let signer: string;

const IN = 2_000_000;
const OUT = 5_000_000;
/** What each juror model answers; a function of the request body. */
const jurors: Record<string, (body: any) => { status: number; content: string }> = {
  'juror-a': () => ({ status: 200, content: JSON.stringify({ vote: 'approve', rationale: 'The invoice matches the purchase order line by line.' }) }),
  'juror-b': () => ({ status: 200, content: '```json\n{"vote": "approve", "rationale": "Amounts and dates agree; the <signature> is present."}\n```' }),
  'juror-down': () => ({ status: 500, content: '{"error":{"message":"the model crashed"}}' }),
  'juror-chatty': () => ({ status: 200, content: 'I think it should probably be approved, all things considered.' }),
  'juror-rogue': () => ({ status: 200, content: JSON.stringify({ vote: 'escalate', rationale: 'None of the options fit.' }) }),
  'juror-no': () => ({ status: 200, content: JSON.stringify({ vote: 'reject', rationale: 'The totals differ by 12.' }) }),
};

beforeAll(async () => {
  up = await startScriptedUpstream();
  up.handler = (_req, body, res) => {
    const a = (jurors[body.model] ?? (() => ({ status: 404, content: '{}' })))(body);
    if (a.status !== 200) return void res.writeHead(a.status, { 'content-type': 'application/json' }).end(a.content);
    res.writeHead(200, { 'content-type': 'application/json' }).end(
      JSON.stringify({ id: 'c1', object: 'chat.completion', created: 1, model: body.model, choices: [{ index: 0, message: { role: 'assistant', content: a.content }, finish_reason: 'stop' }], usage: { prompt_tokens: 100, completion_tokens: 20, total_tokens: 120 } }),
    );
  };
  t = await startTestGateway({
    env: {
      ...ENFORCED_BILLING,
      SVC_INFERENCE_TIMEOUT_SECONDS: '5',
      SVC_PROVIDERS: JSON.stringify([
        {
          name: 'local',
          base_url: up.url,
          models: [...Object.keys(jurors).map((id) => ({ id, input_micro_usd_per_mtok: IN, output_micro_usd_per_mtok: OUT, max_output_tokens: 500 })), { id: 'embedder', input_micro_usd_per_mtok: IN, embedding: true }],
        },
      ]),
    },
  });
  signer = ((await (await fetch(`${t.url}/v1/receipts/pubkey`)).json()) as { address: string }).address;
  browser = await launchChromium();
  context = await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true });
});
afterAll(async () => {
  await context?.close();
  await browser?.close();
  await t?.close();
  await up?.close();
});

async function account(scopes: Scope[] = ['proofs', 'inference']) {
  const s = await t.signIn();
  await t.gw.services.metering.credit(s.accountId, 10_000_000, 'grant', `grant-${s.accountId}`);
  const key = await s.client.createKey({ scopes });
  return { ...s, keyId: key.id, api: new SvcClient({ baseUrl: t.url, credential: { kind: 'key', token: key.key } }) };
}

const sha256 = (b: Buffer | string) => createHash('sha256').update(b).digest();
/** The documented evidence leaf, written here from docs/quality.md: sha256(u32be(len(label)) || label || sha256(content)). */
function evidenceLeaf(label: string, content: string): Buffer {
  const l = Buffer.from(label, 'utf8');
  const len = Buffer.alloc(4);
  len.writeUInt32BE(l.length);
  return sha256(Buffer.concat([len, l, sha256(Buffer.from(content, 'utf8'))]));
}

const QUESTION = 'Should invoice INV-2291 be approved for payment? <b>Answer carefully</b>';
const OPTIONS = ['approve', 'reject'];
const EVIDENCE = [
  { label: 'invoice', content: 'INV-2291: 3 x widget @ 40.00 = 120.00, due 2026-12-01' },
  { label: 'purchase order', content: 'PO-771: 3 x widget @ 40.00, total 120.00' },
  { label: 'délivery note ✓', content: 'Delivered 3 widgets on 2026-11-20, signed by J. Doe' },
];

describe('judge verdicts', () => {
  let a: Awaited<ReturnType<typeof account>>;
  let v: any;

  it('asks three jurors; one fails and abstains with its reason; the outcome is signed, the evidence root recomputes', async () => {
    a = await account();
    const before = up.seen.length;
    const r = await call(a.api, 'POST', '/v1/judge/verdicts', { models: ['juror-a', 'juror-b', 'juror-down'], question: QUESTION, options: OPTIONS, evidence: EVIDENCE });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    v = r.body;
    expect(up.seen.length - before).toBe(3);
    // Each juror saw the question, the options and every labeled item.
    for (const s of up.seen.slice(before)) {
      const prompt = String(s.body.messages[1].content);
      expect(prompt).toContain(QUESTION);
      for (const e of EVIDENCE) expect(prompt).toContain(`[${e.label}]\n${e.content}`);
    }

    expect(v).toMatchObject({ object: 'judge_verdict', state: 'unpublished', models: ['juror-a', 'juror-b', 'juror-down'], options: OPTIONS, outcome: 'approve', abstentions: 1, question: QUESTION, published_at: null });
    expect(v.tally).toEqual([{ option: 'approve', votes: 2 }, { option: 'reject', votes: 0 }]);
    expect(v.jurors[0]).toMatchObject({ model: 'juror-a', vote: 'approve', abstained: false, abstain_reason: null, rationale: 'The invoice matches the purchase order line by line.' });
    expect(v.jurors[1]).toMatchObject({ model: 'juror-b', vote: 'approve', rationale: 'Amounts and dates agree; the <signature> is present.' });
    expect(v.jurors[2]).toMatchObject({ model: 'juror-down', vote: null, abstained: true, rationale: null, rationale_sha256: null, receipt_id: null, receipt: null, cost_micro_usd: 0 });
    expect(v.jurors[2].abstain_reason).toMatch(/^call failed: upstream_error: /);

    // The signed outcome: EIP-191 over its canonical text, recovered with ethers to the published signer.
    expect(verifyMessage(v.receipt.canonical, v.receipt.signature).toLowerCase()).toBe(signer.toLowerCase());
    expect(`0x${sha256(v.receipt.canonical).toString('hex')}`).toBe(v.receipt.hash);
    const p = JSON.parse(v.receipt.canonical);
    expect(p).toMatchObject({ kind: 'judge_verdict', verdict_id: v.id, key_id: a.keyId, account_id: a.accountId, models: v.models, outcome: 'approve', cost_micro_usd: 0 });
    expect(p.signer.toLowerCase()).toBe(signer.toLowerCase());
    expect(p.question_sha256).toBe(`0x${sha256(QUESTION).toString('hex')}`);
    expect(p.jurors.map((j: any) => j.rationale_sha256)).toEqual([`0x${sha256(v.jurors[0].rationale).toString('hex')}`, `0x${sha256(v.jurors[1].rationale).toString('hex')}`, null]);
    expect(p.jurors[2]).toMatchObject({ abstained: true, abstain_reason: v.jurors[2].abstain_reason });
    expect(JSON.stringify(p)).not.toContain('line by line'); // fingerprints, not rationales
    expect(JSON.stringify(p)).not.toContain('INV-2291'); // hashes, not evidence

    // The evidence root, recomputed from the evidence with this test's own RFC 6962 tree.
    const root = hex(mth(EVIDENCE.map((e) => evidenceLeaf(e.label, e.content))));
    expect(p.evidence.root).toBe(root);
    expect(v.evidence.root).toBe(root);
    expect(p.evidence.items).toEqual(EVIDENCE.map((e) => ({ label: e.label, sha256: `0x${sha256(e.content).toString('hex')}` })));

    // Every juror that answered is a metered chat completion of the calling key with its own signed receipt.
    for (const j of v.jurors.slice(0, 2)) {
      expect(verifyMessage(j.receipt.canonical, j.receipt.signature).toLowerCase()).toBe(signer.toLowerCase());
      expect(j.receipt.payload).toMatchObject({ kind: 'inference', key_id: a.keyId, model: j.model, route: 'POST /v1/judge/verdicts', cost_micro_usd: 100 * 2 + 20 * 5 });
      expect(j.receipt_hash).toBe(`0x${sha256(j.receipt.canonical).toString('hex')}`);
      const stored = await call(a.client, 'GET', `/v1/receipts/${j.receipt_id}`);
      expect(stored.body.canonical).toBe(j.receipt.canonical);
    }
    expect(p.jurors_cost_micro_usd).toBe(600);
    const balance = await call(a.client, 'GET', '/v1/billing/balance');
    expect(balance.body.balance_micro_usd).toBe(10_000_000 - 600);

    // Question and rationales are returned once and not stored.
    const row = await t.gw.database.db.selectFrom('judge_verdicts').selectAll().where('id', '=', v.id).executeTakeFirstOrThrow();
    expect(row).toMatchObject({ state: 'unpublished', question_sealed: null, rationales_sealed: null });
    expect(JSON.stringify(row)).not.toContain('Answer carefully');
    expect(JSON.stringify(row)).not.toContain('line by line');
    const one = await call(a.api, 'GET', `/v1/judge/verdicts/${v.id}`);
    expect(one.status).toBe(200);
    expect(one.body).not.toHaveProperty('question');
    expect(one.body.jurors[0]).not.toHaveProperty('rationale');
    expect(one.body).toMatchObject({ id: v.id, outcome: 'approve', receipt: { hash: v.receipt.hash }, anchor: { hash: v.receipt.hash } });
  });

  it('lists content-free rows with the trust model; ?limit= 1 to 200, default 50', async () => {
    const list = await call(a.api, 'GET', '/v1/judge/verdicts');
    expect(list.body.verdicts.map((x: any) => x.id)).toEqual([v.id]);
    expect(list.body.trust_model).toMatch(/not that they are right/);
    expect(JSON.stringify(list.body)).not.toContain('line by line');
    for (const limit of [0, 201, 'x']) expect((await a.api.raw('GET', '/v1/judge/verdicts', { query: { limit } })).status, String(limit)).toBe(400);
    expect((await call(a.api, 'GET', '/v1/judge/verdicts?limit=1')).body.verdicts).toHaveLength(1);
  });

  it('an unpublished verdict is 404 publicly; publish checks the fingerprints (400 naming the field, nothing changes)', async () => {
    const pub = await fetch(`${t.url}/v1/judge/public/${v.id}`);
    expect(pub.status).toBe(404);
    const unknown = await fetch(`${t.url}/v1/judge/public/vrd_unknown`);
    expect(await pub.json()).toMatchObject({ error: { type: 'not_found' } });
    expect(unknown.status).toBe(404);
    expect((await fetch(`${t.url}/j/${v.id}`)).status).toBe(404);

    const rationales = v.jurors.map((j: any) => j.rationale);
    const wrong: Array<[Record<string, unknown>, string]> = [
      [{ question: `${QUESTION} `, rationales }, 'question'],
      [{ question: QUESTION, rationales: ['The invoice matches the purchase order.', rationales[1], null] }, 'rationales[0]'],
      [{ question: QUESTION, rationales: [rationales[0], rationales[1], 'I abstained but here is why'] }, 'rationales[2]'],
      [{ question: QUESTION, rationales: rationales.slice(0, 2) }, 'rationales'],
    ];
    for (const [body, param] of wrong) {
      const r = await call(a.api, 'POST', `/v1/judge/verdicts/${v.id}/publish`, body);
      expect(r.status, param).toBe(400);
      expect(r.body.error, param).toMatchObject({ type: 'invalid_request', param, reason: 'fingerprint_mismatch' });
    }
    const row = await t.gw.database.db.selectFrom('judge_verdicts').select(['state', 'question_sealed']).where('id', '=', v.id).executeTakeFirstOrThrow();
    expect(row).toEqual({ state: 'unpublished', question_sealed: null });
  });

  it('publishes: sealed at rest, served publicly and on /j/{id}, verified valid in the browser', async () => {
    const rationales = v.jurors.map((j: any) => j.rationale);
    const r = await call(a.api, 'POST', `/v1/judge/verdicts/${v.id}/publish`, { question: QUESTION, rationales });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body).toMatchObject({ state: 'published', question: QUESTION, jurors: [{ rationale: rationales[0] }, { rationale: rationales[1] }, { rationale: null }] });
    const row = await t.gw.database.db.selectFrom('judge_verdicts').selectAll().where('id', '=', v.id).executeTakeFirstOrThrow();
    expect(row.question_sealed).not.toBeNull();
    expect(row.rationales_sealed).not.toBeNull();
    expect(Buffer.from(row.question_sealed!).toString('latin1')).not.toContain('invoice');
    expect(Buffer.from(row.rationales_sealed!).toString('latin1')).not.toContain('line by line');

    await t.gw.leader.runAllOnce(); // the anchors loop batches the outcome's hash
    const pub = await fetch(`${t.url}/v1/judge/public/${v.id}`);
    expect(pub.status).toBe(200);
    const body = (await pub.json()) as any;
    expect(body).toMatchObject({ question: QUESTION, outcome: 'approve', receipt: { canonical: v.receipt.canonical, signature: v.receipt.signature }, evidence: { root: v.evidence.root } });
    expect(body.anchor.root).toMatch(/^0x[0-9a-f]{64}$/);
    expect(hex(rootFromPath(buf(v.receipt.hash), body.anchor.leaf_index, body.anchor.tree_size, body.anchor.proof.map(buf))!)).toBe(body.anchor.root);

    const o = await open(`/j/${v.id}`);
    expect(o.status).toBe(200);
    expect(o.verdict).toBe('valid');
    expect(o.checks).toEqual({ signature: 'ok', binding: 'ok', fingerprints: 'ok', evidence: 'ok', tally: 'ok', anchor: 'ok' });
    expect(await o.page.textContent('#question')).toBe(QUESTION); // caller text as text, never markup
    expect(await o.page.locator('#question b').count()).toBe(0);
    expect(await o.page.textContent('#outcome')).toBe('approve');
    expect(await o.page.textContent('main')).toContain('abstained');
    expect(await o.page.textContent('#recovered')).toBe(signer.toLowerCase());
    for (const u of o.requests) expect(new URL(u).origin, u).toBe(t.url);
    expect(o.requests.some((u) => new URL(u).pathname === '/assets/verdict.js')).toBe(true);
    await o.page.close();

    // A rationale altered on its way to the browser (in the page's data) no longer matches its signed fingerprint.
    const altered = await open(`/j/${v.id}`, (h) => h.replace(/("rationales":\["[^"]*)line by line/, '$1line by lime'));
    expect(altered.verdict).toBe('invalid');
    expect(altered.checks).toMatchObject({ signature: 'ok', fingerprints: 'failed' });
    await altered.page.close();
  });

  it('unpublishes: the record and page are gone (404) and the sealed columns are null; the signed outcome stays', async () => {
    const r = await call(a.api, 'POST', `/v1/judge/verdicts/${v.id}/unpublish`, {});
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ state: 'unpublished', unpublished_at: expect.any(String), receipt: { hash: v.receipt.hash } });
    expect((await fetch(`${t.url}/v1/judge/public/${v.id}`)).status).toBe(404);
    const page = await fetch(`${t.url}/j/${v.id}`);
    expect(page.status).toBe(404);
    expect(await page.text()).not.toContain('Answer carefully');
    const row = await t.gw.database.db.selectFrom('judge_verdicts').selectAll().where('id', '=', v.id).executeTakeFirstOrThrow();
    expect(row).toMatchObject({ state: 'unpublished', question_sealed: null, rationales_sealed: null, receipt_hash: v.receipt.hash });
    // Idempotent.
    expect((await call(a.api, 'POST', `/v1/judge/verdicts/${v.id}/unpublish`, {})).status).toBe(200);
  });

  it('records out-of-format answers as abstentions; a tie is no outcome', async () => {
    const b = await account();
    const r = await call(b.api, 'POST', '/v1/judge/verdicts', { models: ['juror-chatty', 'juror-rogue', 'juror-a', 'juror-no'], question: 'Approve?', options: OPTIONS, evidence: [{ label: 'note', content: 'n/a' }] });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    expect(r.body.jurors.map((j: any) => [j.vote, j.abstain_reason])).toEqual([
      [null, 'out of format: the answer is not JSON'],
      [null, 'out of format: the vote is not one of the options'],
      ['approve', null],
      ['reject', null],
    ]);
    // The abstainers' calls were made and charged all the same: their receipts are recorded.
    expect(r.body.jurors[0].receipt_id).toMatch(/^req_/);
    expect(r.body).toMatchObject({ outcome: null, abstentions: 2, tally: [{ option: 'approve', votes: 1 }, { option: 'reject', votes: 1 }] });
  });

  it('refuses bad input with a 4xx naming the field, and writes nothing', async () => {
    const b = await account();
    const good = { models: ['juror-a'], question: 'Q?', options: OPTIONS, evidence: [{ label: 'x', content: 'y' }] };
    const bad: Array<[string, Record<string, unknown>, string]> = [
      ['no jurors', { ...good, models: [] }, 'models'],
      ['six jurors', { ...good, models: ['juror-a', 'juror-b', 'juror-down', 'juror-chatty', 'juror-rogue', 'juror-no'] }, 'models'],
      ['a duplicate juror model', { ...good, models: ['juror-a', 'juror-b', 'juror-a'] }, 'models[2]'],
      ['an unknown model', { ...good, models: ['juror-a', 'no-such-model'] }, 'models[1]'],
      ['an embeddings model', { ...good, models: ['embedder'] }, 'models[0]'],
      ['one option', { ...good, options: ['approve'] }, 'options'],
      ['duplicate options', { ...good, options: ['approve', 'approve'] }, 'options[1]'],
      ['no evidence', { ...good, evidence: [] }, 'evidence'],
      ['duplicate labels', { ...good, evidence: [{ label: 'x', content: '1' }, { label: 'x', content: '2' }] }, 'evidence[1].label'],
      ['an empty question', { ...good, question: '' }, 'question'],
      ['an unknown field', { ...good, jurors: 3 }, 'jurors'],
    ];
    const seen = up.seen.length;
    for (const [what, body, param] of bad) {
      const r = await call(b.api, 'POST', '/v1/judge/verdicts', body);
      expect(r.status, what).toBe(400);
      expect(r.body.error, what).toMatchObject({ type: 'invalid_request', param });
    }
    expect(up.seen.length).toBe(seen); // no juror was asked
    expect((await call(b.api, 'GET', '/v1/judge/verdicts')).body.verdicts).toEqual([]);

    // A key without the inference scope cannot run jurors; a session cannot call the key routes.
    const proofsOnly = await account(['proofs']);
    const noInference = await call(proofsOnly.api, 'POST', '/v1/judge/verdicts', good);
    expect(noInference.status).toBe(403);
    expect(noInference.body.error).toMatchObject({ type: 'insufficient_scope', required_scope: 'inference' });
    expect((await call(b.client, 'POST', '/v1/judge/verdicts', good)).status).toBe(401);

    // Another account's verdict is not found for any key route.
    for (const [m, path, body] of [['GET', `/v1/judge/verdicts/${v.id}`], ['POST', `/v1/judge/verdicts/${v.id}/publish`, { question: QUESTION, rationales: [null] }], ['POST', `/v1/judge/verdicts/${v.id}/unpublish`, {}]] as const) {
      const r = await call(b.api, m, path, body);
      expect(r.status, `${m} ${path}`).toBe(404);
    }
  });

  it('answers an account out of credit with 402 and records no verdict', async () => {
    const s = await t.signIn();
    const key = await s.client.createKey({ scopes: ['proofs', 'inference'] });
    const api = new SvcClient({ baseUrl: t.url, credential: { kind: 'key', token: key.key } });
    const r = await call(api, 'POST', '/v1/judge/verdicts', { models: ['juror-a', 'juror-b'], question: 'Q?', options: OPTIONS, evidence: [{ label: 'x', content: 'y' }] });
    expect(r.status).toBe(402);
    expect(r.body.error.type).toBe('insufficient_credit');
    expect((await call(api, 'GET', '/v1/judge/verdicts')).body.verdicts).toEqual([]);
  });
});

const open = (path: string, alter?: (html: string) => string) => openPublicPage(context, t.url, path, alter);
