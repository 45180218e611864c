import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { canonicalize } from '@svc/shared';
import { ApiError, SvcClient } from '@svc/shared/client';
import { STATE_KEYS_PER_ACCOUNT, STATE_LIST_CAP, STATE_VALUE_MAX_BYTES } from '../control-plane/src/modules/state/names.ts';
import { TEST_DB_KIND } from './support/database.ts';
import { expectApiError } from './support/expect-error.ts';
import { startTestGateway } from './support/gateway.ts';

/** Durable state end to end over HTTP with API keys, on the embedded database and (npm run test:pg) on Postgres. */
let t: Awaited<ReturnType<typeof startTestGateway>>;
beforeAll(async () => {
  t = await startTestGateway();
});
afterAll(async () => t?.close());

type Json = Record<string, any>;
interface Account {
  accountId: string;
  key: string;
  api: SvcClient;
  session: SvcClient;
}

async function account(): Promise<Account> {
  const s = await t.signIn();
  const key = (await s.client.createKey({ scopes: ['memory', 'keys:delegate'] })).key;
  return { accountId: s.accountId, key, session: s.client, api: new SvcClient({ baseUrl: t.url, credential: { kind: 'key', token: key } }) };
}

const path = (key: string, namespace?: string) => `/v1/state/${encodeURIComponent(key)}${namespace === undefined ? '' : `?namespace=${encodeURIComponent(namespace)}`}`;
const put = (c: SvcClient, key: string, body: Json, headers: Record<string, string> = {}, namespace?: string) => c.raw('PUT', path(key, namespace), { body, headers });
const get = (c: SvcClient, key: string, namespace?: string) => c.request<Json>('GET', path(key, namespace));
const list = (c: SvcClient, namespace?: string) => c.request<Json>('GET', '/v1/state', { query: { namespace } });
const del = (c: SvcClient, key: string, headers: Record<string, string> = {}, namespace?: string) => c.request<Json>('DELETE', path(key, namespace), { headers });
const json = async (r: Response) => ({ status: r.status, etag: r.headers.get('etag'), body: (await r.json()) as Json });
const rows = async (accountId: string) =>
  Number((await t.gw.database.db.selectFrom('state_values').select((eb) => eb.fn.countAll<number>().as('n')).where('account_id', '=', accountId).executeTakeFirstOrThrow()).n);

/** Rows written straight into the table (their sealed values are placeholders, never read): a namespace or an account near its limit. */
async function seed(accountId: string, namespace: string, keys: string[]) {
  const now = t.clock.now();
  for (let i = 0; i < keys.length; i += 1000) {
    const chunk = keys.slice(i, i + 1000).map((key) => ({ account_id: accountId, namespace, key, version: 1, value_sealed: Buffer.from('seeded'), size: 4, created_at: now, updated_at: now }));
    await t.gw.database.db.insertInto('state_values').values(chunk).execute();
  }
}

/**
 * On the server, runs `race` while this test holds `lock` (a row lock), releasing it once two transactions wait
 * for it: the racers then truly overlap. The embedded database runs one transaction at a time.
 */
async function raceOnServer<T>(lock: { sql: string; params: unknown[] }, race: () => Promise<T>): Promise<T> {
  if (TEST_DB_KIND !== 'postgres') return race();
  const holder = new pg.Client({ connectionString: t.databaseUrl });
  await holder.connect();
  try {
    await holder.query('begin');
    await holder.query(lock.sql, lock.params);
    const running = race();
    await expect
      .poll(async () => {
        await holder.query('select pg_stat_clear_snapshot()'); // activity is otherwise read once per transaction
        return Number((await holder.query(`select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`)).rows[0].n);
      }, { timeout: 10_000 })
      .toBe(2);
    await holder.query('rollback');
    return await running;
  } finally {
    await holder.end();
  }
}
const valueLock = (accountId: string, key: string, namespace = 'default') => ({
  sql: 'select key from state_values where account_id = $1 and namespace = $2 and key = $3 for update',
  params: [accountId, namespace, key],
});
const accountLock = (accountId: string) => ({ sql: 'select id from accounts where id = $1 for update', params: [accountId] });

describe('state values', () => {
  let a: Account;
  let b: Account;
  beforeAll(async () => {
    a = await account();
    b = await account();
  });

  it('stores any JSON value, sealed at rest, and reads it back with its version as ETag', async () => {
    const created = await json(await put(a.api, 'profile', { value: { name: 'Ada', tags: ['x', 'y'], nested: { z: 1, a: 2 } } }));
    expect(created.status).toBe(201);
    expect(created.etag).toBe('"1"');
    expect(created.body).toMatchObject({ object: 'state_value', key: 'profile', namespace: 'default', version: 1, created: true });
    expect(created.body.size).toBe(Buffer.byteLength(canonicalize({ name: 'Ada', tags: ['x', 'y'], nested: { z: 1, a: 2 } })));
    expect(created.body).not.toHaveProperty('value');

    const read = await a.api.raw('GET', path('profile'));
    expect(read.headers.get('etag')).toBe('"1"');
    const body = (await read.json()) as Json;
    expect(body).toMatchObject({ key: 'profile', namespace: 'default', version: 1, value: { name: 'Ada', tags: ['x', 'y'], nested: { a: 2, z: 1 } } });
    expect(Object.keys(body.value.nested)).toEqual(['a', 'z']); // read back in canonical form

    const replaced = await json(await put(a.api, 'profile', { value: 'second' }));
    expect(replaced).toMatchObject({ status: 200, etag: '"2"', body: { version: 2, created: false, size: 8 } });
    expect((await get(a.api, 'profile')).value).toBe('second');

    // Falsy and empty values are values.
    for (const [i, value] of [null, false, 0, '', [], {}, -1.5e-7, 'ünïcödé 🙂', [1, [2, [3]], { '': null }]].entries()) {
      const k = `falsy-${i}`;
      expect((await put(a.api, k, { value })).status, k).toBe(201);
      expect((await get(a.api, k)).value, k).toEqual(value);
    }

    // At rest the value is ciphertext: the row holds neither the text nor its canonical JSON.
    await put(a.api, 'secret', { value: { password: 'correct horse battery staple' } });
    const row = await t.gw.database.db.selectFrom('state_values').selectAll().where('account_id', '=', a.accountId).where('key', '=', 'secret').executeTakeFirstOrThrow();
    expect(Buffer.from(row.value_sealed).includes(Buffer.from('correct horse'))).toBe(false);
    expect(row.value_sealed[0]).toBe(1); // the sealing format's version byte
  });

  it('keeps namespaces apart; the namespace comes from the body or the query string', async () => {
    await put(a.api, 'shared-key', { value: 'in default' });
    const other = await json(await put(a.api, 'shared-key', { value: 'in other', namespace: 'other.ns_1-x' }));
    expect(other).toMatchObject({ status: 201, body: { namespace: 'other.ns_1-x', version: expect.any(Number) } });
    expect((await json(await put(a.api, 'q-key', { value: 1 }, {}, 'by-query'))).body.namespace).toBe('by-query');
    expect((await json(await put(a.api, 'q-key', { value: 2, namespace: 'by-query' }, {}, 'by-query'))).status).toBe(200);
    expect((await get(a.api, 'shared-key')).value).toBe('in default');
    expect((await get(a.api, 'shared-key', 'default')).value).toBe('in default');
    expect((await get(a.api, 'shared-key', 'other.ns_1-x')).value).toBe('in other');
    await expectApiError(get(a.api, 'q-key'), 404, 'not_found');
    const e = await expectApiError(put(a.api, 'q-key', { value: 3, namespace: 'one' }, {}, 'two').then(assertOk), 400, 'invalid_request');
    expect(e.param).toBe('namespace');
  });

  it('lists the keys of one namespace in byte order, without values', async () => {
    const c = await account();
    for (const k of ['b', 'B', 'a', 'é', 'a b', '_', 'Z', '10', '9']) await put(c.api, k, { value: `v-${k}`, namespace: 'order' });
    await put(c.api, 'elsewhere', { value: 1 });
    const l = await list(c.api, 'order');
    expect(l.keys.map((k: Json) => k.key)).toEqual(['10', '9', 'B', 'Z', '_', 'a', 'a b', 'b', 'é']);
    expect(l).toMatchObject({ namespace: 'order', count: 9, truncated: false, cap: STATE_LIST_CAP });
    expect(l.keys[0]).toEqual({ key: '10', version: expect.any(Number), size: 6, updated_at: expect.any(String) });
    expect(JSON.stringify(l)).not.toContain('v-');
    expect(await list(c.api)).toMatchObject({ namespace: 'default', count: 1, truncated: false, keys: [{ key: 'elsewhere' }] });
    expect(await list(c.api, 'empty')).toEqual({ keys: [], namespace: 'empty', count: 0, truncated: false, cap: STATE_LIST_CAP });
  });

  it(`lists at most ${STATE_LIST_CAP} keys of a namespace and says when it truncates`, async () => {
    const c = await account();
    const keys = Array.from({ length: STATE_LIST_CAP + 1 }, (_, i) => `k${String(i).padStart(5, '0')}`);
    await seed(c.accountId, 'big', keys.slice(0, STATE_LIST_CAP));
    let l = await list(c.api, 'big');
    expect(l).toMatchObject({ count: STATE_LIST_CAP, truncated: false });
    expect(l.keys).toHaveLength(STATE_LIST_CAP);
    await put(c.api, keys[STATE_LIST_CAP]!, { value: 'one more', namespace: 'big' });
    l = await list(c.api, 'big');
    expect(l).toMatchObject({ count: STATE_LIST_CAP + 1, truncated: true });
    expect(l.keys.map((k: Json) => k.key)).toEqual(keys.slice(0, STATE_LIST_CAP)); // the first ones in order
  });

  it('deletes one value (200, then 404); a key created anew starts above every version the account deleted', async () => {
    const c = await account();
    await put(c.api, 'doomed', { value: 1 });
    await put(c.api, 'doomed', { value: 2 });
    await put(c.api, 'doomed', { value: 3 });
    expect(await del(c.api, 'doomed')).toEqual({ object: 'state_value', key: 'doomed', namespace: 'default', version: 3, deleted: true });
    await expectApiError(get(c.api, 'doomed'), 404, 'not_found');
    const e = await expectApiError(del(c.api, 'doomed'), 404, 'not_found');
    expect(e.message).toContain('"doomed"');
    await expectApiError(del(c.api, 'doomed', { 'if-match': '"3"' }), 404, 'not_found'); // absent: 404 whatever the condition
    expect(await list(c.api)).toMatchObject({ count: 0, keys: [] });

    // A client still holding version 1, 2 or 3 of the old value cannot overwrite the new one.
    const again = await json(await put(c.api, 'doomed', { value: 'reborn' }));
    expect(again).toMatchObject({ status: 201, etag: '"4"', body: { version: 4 } });
    expect((await json(await put(c.api, 'another', { value: 1 }))).body.version).toBe(4);
    expect((await json(await put(c.api, 'doomed', { value: 'stale' }, { 'if-match': '"1"' }))).status).toBe(412);
    expect((await get(c.api, 'doomed')).value).toBe('reborn');
  });

  it('compare-and-set: If-Match refuses a stale write with 412 naming the current version; If-None-Match: * creates only', async () => {
    const c = await account();
    const absent = await json(await put(c.api, 'cas', { value: 'x' }, { 'if-match': '1' }));
    expect(absent).toMatchObject({ status: 412, body: { error: { type: 'precondition_failed', param: 'if-match', current_version: null } } });
    expect((await json(await put(c.api, 'cas', { value: 'x' }, { 'if-match': '*' }))).status).toBe(412);
    expect(await rows(c.accountId)).toBe(0);

    expect((await json(await put(c.api, 'cas', { value: 'v1' }, { 'if-none-match': '*' }))).status).toBe(201);
    const exists = await json(await put(c.api, 'cas', { value: 'v1 again' }, { 'if-none-match': '*' }));
    expect(exists).toMatchObject({ status: 412, body: { error: { type: 'precondition_failed', param: 'if-none-match', current_version: 1 } } });
    expect((await json(await put(c.api, 'cas', { value: 'v2' }, { 'if-match': '"1"' })))).toMatchObject({ status: 200, etag: '"2"' });
    const stale = await json(await put(c.api, 'cas', { value: 'lost update' }, { 'if-match': '"1"' }));
    expect(stale).toMatchObject({ status: 412, body: { error: { type: 'precondition_failed', current_version: 2, request_id: expect.any(String) } } });
    expect(stale.body.error.message).toMatch(/version 1.*current version is 2/);
    expect((await json(await put(c.api, 'cas', { value: 'v3' }, { 'if-match': '2' })))).toMatchObject({ status: 200, etag: '"3"' });
    expect((await json(await put(c.api, 'cas', { value: 'v4' }, { 'if-match': '*' })))).toMatchObject({ status: 200, etag: '"4"' });
    expect(await get(c.api, 'cas')).toMatchObject({ value: 'v4', version: 4 });

    await expectApiError(del(c.api, 'cas', { 'if-match': '"3"' }), 412, 'precondition_failed');
    expect((await get(c.api, 'cas')).value).toBe('v4');
    expect(await del(c.api, 'cas', { 'if-match': '"4"' })).toMatchObject({ deleted: true, version: 4 });
  });

  it('two writers with the same If-Match: exactly one wins, the other gets 412', async () => {
    const c = await account();
    await put(c.api, 'counter', { value: 0 });
    const writer = (n: number) => put(c.api, 'counter', { value: n }, { 'if-match': '"1"' }).then(json);
    // On the server both transactions wait on the value's row lock at once, then run against the same version.
    const [x, y] = await raceOnServer(valueLock(c.accountId, 'counter'), () => Promise.all([writer(1), writer(2)]));
    expect([x.status, y.status].sort()).toEqual([200, 412]);
    const won = x.status === 200 ? x : y;
    const lost = x.status === 200 ? y : x;
    expect(won.body.version).toBe(2);
    expect(lost.body.error).toMatchObject({ type: 'precondition_failed', current_version: 2 });
    expect(await get(c.api, 'counter')).toMatchObject({ version: 2, value: x.status === 200 ? 1 : 2 });

    // Two creators with If-None-Match: *: one creates, the other finds it (they wait on the account lock).
    const creator = (n: number) => put(c.api, 'once', { value: n }, { 'if-none-match': '*' }).then(json);
    const raced = await raceOnServer(accountLock(c.accountId), () => Promise.all([creator(1), creator(2)]));
    expect(raced.map((r) => r.status).sort()).toEqual([201, 412]);
    expect(await rows(c.accountId)).toBe(2);
  });

  it(`refuses the key that would pass ${STATE_KEYS_PER_ACCOUNT} per account with 409, also under concurrent creations; replacing stays allowed`, async () => {
    const c = await account();
    await seed(c.accountId, 'filler', Array.from({ length: STATE_KEYS_PER_ACCOUNT - 2 }, (_, i) => `f${i}`));
    await put(c.api, 'nearly', { value: 1, namespace: 'other' }); // 9,999
    const creator = (k: string) => put(c.api, k, { value: k }).then(json);
    // On the server the two creations wait on the account lock together (without it both would count 9,999).
    const raced = await raceOnServer(accountLock(c.accountId), () => Promise.all([creator('racer-1'), creator('racer-2')]));
    expect(raced.map((r) => r.status).sort()).toEqual([201, 409]);
    const lost = raced.find((r) => r.status === 409)!;
    expect(lost.body.error).toMatchObject({ type: 'conflict', reason: 'state_key_limit', limit: STATE_KEYS_PER_ACCOUNT });
    expect(await rows(c.accountId)).toBe(STATE_KEYS_PER_ACCOUNT);

    const next = await json(await put(c.api, 'one-too-many', { value: 1, namespace: 'fresh' }));
    expect(next.status).toBe(409);
    expect(next.body.error.message).toContain(`at most ${STATE_KEYS_PER_ACCOUNT} state keys`);
    expect(await rows(c.accountId)).toBe(STATE_KEYS_PER_ACCOUNT);
    expect((await json(await put(c.api, 'nearly', { value: 2, namespace: 'other' }))).status).toBe(200); // replacing is no new key
    await del(c.api, 'nearly', {}, 'other');
    expect((await json(await put(c.api, 'one-too-many', { value: 1, namespace: 'fresh' }))).status).toBe(201);
  });

  it("isolates accounts: another account's key never sees or overwrites a value", async () => {
    await put(a.api, 'mine', { value: 'a-secret', namespace: 'iso' });
    await expectApiError(get(b.api, 'mine', 'iso'), 404, 'not_found');
    expect(await list(b.api, 'iso')).toMatchObject({ keys: [], count: 0 });
    await expectApiError(del(b.api, 'mine', {}, 'iso'), 404, 'not_found');
    expect((await json(await put(b.api, 'mine', { value: 'b-own' }, { 'if-match': '1' }, 'iso'))).status).toBe(412); // A's version is not B's
    expect((await json(await put(b.api, 'mine', { value: 'b-own', namespace: 'iso' }))).status).toBe(201);
    expect((await get(a.api, 'mine', 'iso')).value).toBe('a-secret');
    expect((await get(b.api, 'mine', 'iso')).value).toBe('b-own');
    expect((await list(a.api, 'iso')).keys).toHaveLength(1);
  });

  it("delegated sub-keys act on their owner account's state; a key without the memory scope is refused", async () => {
    const c = await account();
    const child = await c.api.delegateKey({ scopes: ['memory'] });
    const sub = new SvcClient({ baseUrl: t.url, credential: { kind: 'key', token: child.key } });
    expect((await json(await put(sub, 'from-child', { value: { by: 'child' } }))).status).toBe(201);
    expect((await get(c.api, 'from-child')).value).toEqual({ by: 'child' });
    await put(c.api, 'from-parent', { value: 1 });
    expect((await list(sub)).keys.map((k: Json) => k.key)).toEqual(['from-child', 'from-parent']);
    const grandchild = await new SvcClient({ baseUrl: t.url, credential: { kind: 'key', token: (await c.api.delegateKey({ scopes: ['memory', 'keys:delegate'] })).key } }).delegateKey({ scopes: ['memory'] });
    expect((await get(new SvcClient({ baseUrl: t.url, credential: { kind: 'key', token: grandchild.key } }), 'from-parent')).value).toBe(1);
    const noScope = new SvcClient({ baseUrl: t.url, credential: { kind: 'key', token: (await c.session.createKey({ scopes: ['billing'] })).key } });
    await expectApiError(get(noScope, 'from-parent'), 403, 'insufficient_scope');
    await expectApiError(get(c.session, 'from-parent'), 401, 'wrong_credential_kind');
  });
});

/** Throws the ApiError of a non-2xx answer (for expectApiError). */
async function assertOk(r: Response): Promise<Json> {
  const body = (await r.json()) as Json;
  if (r.ok) return body;
  throw new ApiError(r.status, body, r.headers);
}

describe('state input', () => {
  let c: Account;
  beforeAll(async () => {
    c = await account();
    await put(c.api, 'exists', { value: 'kept' });
  });
  const send = (method: string, p: string, body?: string, headers: Record<string, string> = {}) =>
    fetch(`${t.url}${p}`, { method, headers: { authorization: `Bearer ${c.key}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers }, body }).then(json);

  it('refuses bad input with a 4xx naming the field, writing nothing', async () => {
    const cases: Array<[string, string, string | undefined, Record<string, string>, number, string]> = [
      ['PUT', '/v1/state/a%2Fb', '{"value":1}', {}, 400, 'key'],
      ['GET', '/v1/state/a%2Fb', undefined, {}, 400, 'key'],
      ['DELETE', '/v1/state/a%2Fb', undefined, {}, 400, 'key'],
      ['PUT', '/v1/state/a%0Ab', '{"value":1}', {}, 400, 'key'],
      ['PUT', '/v1/state/a%00b', '{"value":1}', {}, 400, 'key'],
      ['PUT', '/v1/state/a%7Fb', '{"value":1}', {}, 400, 'key'],
      ['PUT', '/v1/state/a%C2%85b', '{"value":1}', {}, 400, 'key'],
      ['PUT', `/v1/state/${'k'.repeat(257)}`, '{"value":1}', {}, 400, 'key'],
      ['PUT', `/v1/state/${encodeURIComponent('é'.repeat(129))}`, '{"value":1}', {}, 400, 'key'],
      ['PUT', '/v1/state/ok', '{"namespace":"x"}', {}, 400, 'value'],
      ['PUT', '/v1/state/ok', '{"value":1e400}', {}, 400, 'value'],
      ['PUT', '/v1/state/ok', '{"value":{"a":[1,-1e999]}}', {}, 400, 'value.a[1]'],
      ['PUT', '/v1/state/ok', '{"value":1,"extra":true}', {}, 400, 'extra'],
      ['PUT', '/v1/state/ok', '{"value":1,"namespace":"bad ns"}', {}, 400, 'namespace'],
      ['PUT', '/v1/state/ok', '{"value":1,"namespace":""}', {}, 400, 'namespace'],
      ['PUT', `/v1/state/ok?namespace=${'n'.repeat(65)}`, '{"value":1}', {}, 400, 'namespace'],
      ['GET', '/v1/state/exists?namespace=a%2Fb', undefined, {}, 400, 'namespace'],
      ['GET', '/v1/state?namespace=with%20space', undefined, {}, 400, 'namespace'],
      ['GET', '/v1/state?ns=typo', undefined, {}, 400, 'ns'],
      ['DELETE', '/v1/state/exists?namespace=%C3%A9', undefined, {}, 400, 'namespace'],
      ['PUT', '/v1/state/exists', '{"value":1}', { 'if-match': 'W/"1"' }, 400, 'if-match'],
      ['PUT', '/v1/state/exists', '{"value":1}', { 'if-match': 'latest' }, 400, 'if-match'],
      ['PUT', '/v1/state/exists', '{"value":1}', { 'if-match': '"1", "2"' }, 400, 'if-match'],
      ['PUT', '/v1/state/exists', '{"value":1}', { 'if-none-match': '"1"' }, 400, 'if-none-match'],
      ['PUT', '/v1/state/exists', '{"value":1}', { 'if-match': '1', 'if-none-match': '*' }, 400, 'if-none-match'],
      ['DELETE', '/v1/state/exists', undefined, { 'if-match': '0' }, 400, 'if-match'],
      ['DELETE', '/v1/state/exists', undefined, { 'if-none-match': '*' }, 400, 'if-none-match'],
    ];
    for (const [method, p, body, headers, status, param] of cases) {
      const r = await send(method, p, body, headers);
      expect({ status: r.status, type: r.body.error?.type, param: r.body.error?.param }, `${method} ${p} ${body ?? ''} ${JSON.stringify(headers)}`).toEqual({ status, type: 'invalid_request', param });
    }
    // Bytes that decode to no text (a lone surrogate's) never reach the route: the router refuses the URL.
    const undecodable = await send('PUT', '/v1/state/a%ED%A0%80b', '{"value":1}');
    expect(undecodable).toMatchObject({ status: 400, body: { error: { type: 'invalid_request', message: expect.stringMatching(/percent-encoding/) } } });
    expect(await rows(c.accountId)).toBe(1);
    expect(await get(c.api, 'exists')).toMatchObject({ value: 'kept', version: 1 });
  });

  it(`refuses a value over ${STATE_VALUE_MAX_BYTES} bytes of canonical JSON with 413 naming it; one at the limit is stored`, async () => {
    const exact = 'x'.repeat(STATE_VALUE_MAX_BYTES - 2); // with its two quotes
    expect((await json(await put(c.api, 'big', { value: exact }))).body.size).toBe(STATE_VALUE_MAX_BYTES);
    const over = await send('PUT', '/v1/state/too-big', JSON.stringify({ value: `${exact}y` }));
    expect(over.status).toBe(413);
    expect(over.body.error).toMatchObject({ type: 'payload_too_large', param: 'value', size: STATE_VALUE_MAX_BYTES + 1, limit_bytes: STATE_VALUE_MAX_BYTES });
    // Whitespace the canonical form drops does not count; a body past the route's limit is refused as it arrives.
    expect((await send('PUT', '/v1/state/spaced', `{"value":   ${JSON.stringify(exact)}${' '.repeat(1000)}}`)).status).toBe(201);
    const huge = await send('PUT', '/v1/state/huge', JSON.stringify({ value: 'z'.repeat(5 * STATE_VALUE_MAX_BYTES) }));
    expect(huge.status).toBe(413);
    expect(huge.body.error.type).toBe('payload_too_large');
    await expectApiError(get(c.api, 'too-big'), 404, 'not_found');
    await expectApiError(get(c.api, 'huge'), 404, 'not_found');
  });

  it('addresses keys with any allowed character, percent-encoded', async () => {
    for (const k of ['with space', 'q?x=1&y#z', '100%', 'ünï 🙂', 'back\\slash', ':colon', 'k'.repeat(256), '日'.repeat(85)]) {
      expect((await json(await put(c.api, k, { value: k }))).status, k).toBe(201);
      expect((await get(c.api, k)).value, k).toBe(k);
      expect((await get(c.api, k)).key, k).toBe(k);
    }
  });
});
