import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { generatePrivateKey, privateKeyToAddress } from '@svc/shared';
import { ConfigError } from '../control-plane/src/config.ts';
import { sealFingerprint } from '../control-plane/src/key-record.ts';
import { childGatewayExit } from './support/child-gateway.ts';
import { TEST_DB_KIND, freshDatabase } from './support/database.ts';
import { startTestGateway } from './support/gateway.ts';

/**
 * Every replica on one database shares the receipt signer and the seal key: the first process to boot records
 * their fingerprints, and a process with other keys refuses to boot (exit 78, naming the variable), whether
 * it generated its own into its data dir or was given others; processes racing the first boot of a fresh
 * database agree on one record. The signer rotates only when the recorded one is named.
 */

const dirs: string[] = [];
const dataDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'svc-replica-'));
  dirs.push(d);
  return d;
};
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const hex = (b: Uint8Array) => `0x${Buffer.from(b).toString('hex')}`;
const pubkey = async (url: string) => ((await (await fetch(`${url}/v1/receipts/pubkey`)).json()) as { address: string }).address;

describe.skipIf(TEST_DB_KIND === 'pglite')('replicas on one Postgres', () => {
  it('a replica with its own data dir and no keys refuses to boot (78), naming SVC_SIGNER_KEY and SVC_SEAL_KEY; one given the keys reads what another sealed', async () => {
    const a = await startTestGateway();
    try {
      const share = { databaseUrl: a.databaseUrl, dataDir: dataDir() };
      const own = await childGatewayExit(share);
      expect(own.booted).toBe(false);
      expect(own.code).toBe(78);
      expect(own.stderr).toContain(`SVC_SIGNER_KEY: this process's receipt signer is `);
      expect(own.stderr).toContain(`but the database records ${a.gw.services.signer.address}`);
      expect(own.stderr).toContain(join(share.dataDir, 'signer.key'));
      expect(own.stderr).toContain(`SVC_SEAL_KEY: this process's seal key`);
      expect(own.stderr).toContain(`the database records (fingerprint ${sealFingerprint(a.gw.sealKey)})`);
      expect(own.stderr).not.toContain(hex(a.gw.sealKey).slice(2)); // fingerprints only, never a key

      // The signer shared, the seal key not: refused for the seal key alone.
      const sealOnly = await childGatewayExit({ databaseUrl: a.databaseUrl, dataDir: dataDir() }, { SVC_SIGNER_KEY: a.gw.signerKey });
      expect(sealOnly.code).toBe(78);
      expect(sealOnly.stderr).toContain('SVC_SEAL_KEY:');
      expect(sealOnly.stderr).not.toContain('SVC_SIGNER_KEY:');

      // Given both keys, a replica with a data dir of its own boots and opens a value sealed through the first.
      const s = await a.signIn();
      const key = (await s.client.createKey({ scopes: ['memory'] })).key;
      const auth = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
      expect((await fetch(`${a.url}/v1/state/greeting`, { method: 'PUT', headers: auth, body: JSON.stringify({ value: { hello: 'world' } }) })).status).toBe(201);
      const b = await startTestGateway({ share: { databaseUrl: a.databaseUrl, dataDir: dataDir() }, clock: a.clock, env: { SVC_SIGNER_KEY: a.gw.signerKey, SVC_SEAL_KEY: hex(a.gw.sealKey) } });
      try {
        const read = await fetch(`${b.url}/v1/state/greeting`, { headers: auth });
        expect(read.status).toBe(200);
        expect(((await read.json()) as { value: unknown }).value).toEqual({ hello: 'world' });
        expect(await pubkey(b.url)).toBe(await pubkey(a.url));
      } finally {
        await b.stop();
      }
    } finally {
      await a.close();
    }
  });

  it('processes racing the first boot of a fresh database agree: with other keys exactly one boots, with the same keys all do', async () => {
    for (const sameKeys of [false, true]) {
      const db = await freshDatabase();
      const env: Record<string, string> = sameKeys ? { SVC_SIGNER_KEY: generatePrivateKey(), SVC_SEAL_KEY: hex(crypto.getRandomValues(new Uint8Array(32))) } : {};
      const started = await Promise.allSettled(Array.from({ length: 3 }, () => startTestGateway({ share: { databaseUrl: db.url, dataDir: dataDir() }, env })));
      try {
        const up = started.filter((r) => r.status === 'fulfilled').map((r) => r.value);
        const refused = started.filter((r) => r.status === 'rejected').map((r) => r.reason as Error);
        expect(up).toHaveLength(sameKeys ? 3 : 1);
        for (const e of refused) {
          expect(e).toBeInstanceOf(ConfigError);
          expect(e.message).toContain('SVC_SIGNER_KEY:');
          expect(e.message).toContain(`the database records ${up[0]!.gw.services.signer.address}`);
        }
        expect(new Set(await Promise.all(up.map((g) => pubkey(g.url)))).size).toBe(1);
      } finally {
        for (const r of started) if (r.status === 'fulfilled') await r.value.stop();
        await db.drop();
      }
    }
  });

  it('rotates the signer only for a process that names the recorded one; the old key is refused after', async () => {
    const a = await startTestGateway({ persistent: true });
    const old = a.gw.services.signer.address;
    const seal = hex(a.gw.sealKey);
    await a.stop();
    try {
      const next = generatePrivateKey();
      const wrong = await childGatewayExit({ databaseUrl: a.databaseUrl, dataDir: dataDir() }, { SVC_SIGNER_KEY: next, SVC_SEAL_KEY: seal, SVC_SIGNER_ROTATE_FROM: privateKeyToAddress(generatePrivateKey()) });
      expect(wrong.code).toBe(78);
      expect(wrong.stderr).toContain(`To rotate the signer to this key instead, set SVC_SIGNER_ROTATE_FROM=${old}`);

      const rotated = await startTestGateway({ share: { databaseUrl: a.databaseUrl, dataDir: dataDir() }, env: { SVC_SIGNER_KEY: next, SVC_SEAL_KEY: seal, SVC_SIGNER_ROTATE_FROM: old } });
      expect(await pubkey(rotated.url)).toBe(privateKeyToAddress(next));
      const record = await rotated.gw.database.db.selectFrom('gateway_keys').select(['signer_address', 'seal_fingerprint', 'previous_signers']).execute();
      expect(record).toEqual([{ signer_address: privateKeyToAddress(next), seal_fingerprint: sealFingerprint(a.gw.sealKey), previous_signers: [{ address: old, replaced_at: expect.any(String) }] }]);
      await rotated.stop();

      // The process with the old signer (its data dir) is now the odd one out.
      const stale = await childGatewayExit({ databaseUrl: a.databaseUrl, dataDir: a.dataDir });
      expect(stale.code).toBe(78);
      expect(stale.stderr).toContain(`SVC_SIGNER_KEY: this process's receipt signer is ${old}`);
      expect(stale.stderr).not.toContain('SVC_SEAL_KEY:');
    } finally {
      await a.close();
    }
  });
});

describe('the embedded database (npm start)', () => {
  it('records the keys generated into the data dir at the first boot; a signer.key replaced later is refused until the rotation is named', async () => {
    const a = await startTestGateway({ persistent: true });
    const old = a.gw.services.signer.address;
    await a.stop();
    try {
      // A restart on the same data dir (same keys) boots.
      const again = await startTestGateway({ share: { databaseUrl: a.databaseUrl, dataDir: a.dataDir } });
      expect(again.gw.services.signer.address).toBe(old);
      await again.stop();
      rmSync(join(a.dataDir, 'signer.key'));
      const refused = await startTestGateway({ share: { databaseUrl: a.databaseUrl, dataDir: a.dataDir } }).then(
        () => null,
        (e: unknown) => e as Error,
      );
      expect(refused).toBeInstanceOf(ConfigError);
      expect(refused!.message).toContain(`generated into ${join(a.dataDir, 'signer.key')} because SVC_SIGNER_KEY is unset`);
      expect(refused!.message).toContain(`SVC_SIGNER_ROTATE_FROM=${old}`);
      const rotated = await startTestGateway({ share: { databaseUrl: a.databaseUrl, dataDir: a.dataDir }, env: { SVC_SIGNER_ROTATE_FROM: old } });
      expect(rotated.gw.services.signer.address).not.toBe(old);
      await rotated.stop();
    } finally {
      await a.close();
    }
  });
});
