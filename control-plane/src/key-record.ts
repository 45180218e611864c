import { createHmac } from 'node:crypto';
import { join } from 'node:path';
import { sql, type Kysely } from 'kysely';
import { ConfigError } from './config/parse.ts';
import type { DB } from './db/schema.ts';

/** The seal key's fingerprint: HMAC-SHA256 of a fixed label under the key, first 32 hex digits (never the key). */
export function sealFingerprint(key: Uint8Array): string {
  return createHmac('sha256', Buffer.from(key)).update('svc seal key fingerprint v1').digest('hex').slice(0, 32);
}

export interface ProcessKeys {
  /** The receipt signer's EIP-55 address. */
  signerAddress: string;
  sealKey: Uint8Array;
  /** Whether each key came from its variable (else from the data dir). */
  configured: { signer: boolean; seal: boolean };
  dataDir: string;
  /** The recorded signer (address) this process's signer replaces: a rotation. */
  signerRotateFrom?: string | undefined;
  /** The recorded seal key (fingerprint) this process's seal key replaces: a lost key. */
  sealReplaceFrom?: string | undefined;
}

/** What a boot changed in the record, for the log. */
export type KeyRecordChange = { recorded: true } | { rotatedSigner: { from: string; to: string } } | { replacedSeal: { from: string; to: string } };

const same = (a: string | undefined, b: string) => a !== undefined && a.toLowerCase() === b.toLowerCase();

/**
 * Every replica on one database signs and seals with the same keys. The first process to boot on a database
 * records its keys' fingerprints (the signer's address, the seal key's HMAC fingerprint; never a key); a
 * process whose keys differ refuses to boot with a ConfigError naming the variable. Processes racing the first
 * boot insert the same one row: exactly one insert wins, and the others compare their keys with it.
 *
 * The recorded signer is replaced only by a process that names it in SVC_SIGNER_ROTATE_FROM (a rotation);
 * the seal key only by one that names its fingerprint in SVC_SEAL_REPLACE_FROM (a lost key: what was sealed
 * under the old key stays unreadable). Each replacement is one conditional UPDATE, so processes racing it
 * with the same new key all boot.
 */
export async function checkKeyRecord(db: Kysely<DB>, k: ProcessKeys, now: Date): Promise<KeyRecordChange[]> {
  const seal = sealFingerprint(k.sealKey);
  const inserted = await db
    .insertInto('gateway_keys')
    .values({ signer_address: k.signerAddress, seal_fingerprint: seal, previous_signers: '[]', recorded_at: now, updated_at: now })
    .onConflict((oc) => oc.column('id').doNothing())
    .executeTakeFirst();
  if (Number(inserted.numInsertedOrUpdatedRows ?? 0n) === 1) return [{ recorded: true }];
  const changes: KeyRecordChange[] = [];
  for (let attempt = 0; ; attempt++) {
    const rec = await db.selectFrom('gateway_keys').selectAll().executeTakeFirstOrThrow();
    const problems: string[] = [];
    let rotate = false;
    let replace = false;
    if (!same(rec.signer_address, k.signerAddress)) {
      if (same(k.signerRotateFrom, rec.signer_address)) rotate = true;
      else problems.push(signerProblem(k, rec.signer_address, rec.recorded_at));
    }
    if (rec.seal_fingerprint !== seal) {
      if (same(k.sealReplaceFrom, rec.seal_fingerprint)) replace = true;
      else problems.push(sealProblem(k, seal, rec.seal_fingerprint));
    }
    if (problems.length) throw new ConfigError(problems);
    if (!rotate && !replace) return changes;
    const r = await db
      .updateTable('gateway_keys')
      .set(() => ({
        ...(rotate ? { signer_address: k.signerAddress, previous_signers: sql`previous_signers || ${JSON.stringify([{ address: rec.signer_address, replaced_at: now.toISOString() }])}::jsonb` as never } : {}),
        ...(replace ? { seal_fingerprint: seal } : {}),
        updated_at: now,
      }))
      .where('signer_address', '=', rec.signer_address)
      .where('seal_fingerprint', '=', rec.seal_fingerprint)
      .executeTakeFirst();
    if (Number(r.numUpdatedRows) === 1) {
      if (rotate) changes.push({ rotatedSigner: { from: rec.signer_address, to: k.signerAddress } });
      if (replace) changes.push({ replacedSeal: { from: rec.seal_fingerprint, to: seal } });
      return changes;
    }
    // Another process changed the record meanwhile: compare with what it wrote.
    if (attempt >= 3) throw new Error('the recorded gateway keys kept changing while this process booted');
  }
}

function signerProblem(k: ProcessKeys, recorded: string, since: Date): string {
  const source = k.configured.signer ? 'set in SVC_SIGNER_KEY' : `generated into ${join(k.dataDir, 'signer.key')} because SVC_SIGNER_KEY is unset`;
  return (
    `SVC_SIGNER_KEY: this process's receipt signer is ${k.signerAddress} (${source}), but the database records ${recorded} (since ${since.toISOString()}); ` +
    'every replica on one database must share SVC_SIGNER_KEY and SVC_SEAL_KEY; give this process the key the others use. ' +
    `To rotate the signer to this key instead, set SVC_SIGNER_ROTATE_FROM=${recorded} (receipts signed before stay verifiable against ${recorded} only)`
  );
}

function sealProblem(k: ProcessKeys, mine: string, recorded: string): string {
  const source = k.configured.seal ? 'set in SVC_SEAL_KEY' : `generated into ${join(k.dataDir, 'seal.key')} because SVC_SEAL_KEY is unset`;
  return (
    `SVC_SEAL_KEY: this process's seal key (fingerprint ${mine}, ${source}) is not the one the database records (fingerprint ${recorded}); ` +
    'content sealed under the recorded key (files, state values, webhook secrets, ...) cannot be opened with it, and every replica on one database must share SVC_SEAL_KEY: ' +
    `give this process the key the others use. Only if the recorded key is lost for good, SVC_SEAL_REPLACE_FROM=${recorded} makes this key the recorded one (what was sealed before stays unreadable)`
  );
}
