import type { Kysely } from 'kysely';
import { newId, notFound, sha256Hex0x, type Clock, type SignedReceipt } from '@svc/shared';
import type { DB } from '../../db/schema.ts';
import type { AssetsConfig } from '../../config/assets.ts';
import type { KeyPrincipal } from '../../http/auth-types.ts';
import type { Anchors } from '../anchors/service.ts';
import type { IdentityService } from '../identity/service.ts';
import type { Metering } from '../money/metering.ts';
import type { ReceiptSigner } from '../money/signer.ts';
import type { EventEmitter } from '../webhooks/service.ts';
import type { Checker } from './checker.ts';
import { attestationEvent } from './events.ts';
import { METHODOLOGY, judgeReadings, publicInputs, statusOf, type AttestationDocument, type CheckSpec } from './record.ts';
import type { CheckBody } from './schemas.ts';
import { evidenceOf, insertRecord, latestRecord, listRecords, newestPublic, recordCount, recordVersion, type RecordRow } from './store.ts';
import { AttestationViews } from './views.ts';

export interface AttestationsDeps {
  db: Kysely<DB>;
  clock: Clock;
  signer: ReceiptSigner;
  metering: Metering;
  identity: IdentityService;
  anchors: Anchors;
  events: EventEmitter;
  checker: Checker;
  config: AssetsConfig;
  publicUrl: URL;
}

export interface Ctx {
  requestId: string;
  runId: string | null;
}

const noRecord = () => notFound('Attestation record');

/**
 * Attestations of on-chain facts. A check reads the token's facts at a pinned block (and an HTTPS reserve
 * figure if named), judges each claimed fact, and stores the next signed version of the account's record of
 * that asset with the bytes of every answer as evidence; a refresh runs the stored check again. Both are
 * metered at one price whatever the result, and a version whose status or readings differ from the one
 * before fires the matching `attestation.*` webhook in the same transaction. Versions are never changed.
 */
export class AttestationsService {
  readonly views: AttestationViews;

  constructor(private readonly d: AttestationsDeps) {
    this.views = new AttestationViews(d.anchors, d.clock);
  }

  explorerSource() {
    return { counts: async () => ({ attestation_records: await recordCount(this.d.db) }) };
  }

  async check(p: KeyPrincipal, body: CheckBody, ctx: Ctx) {
    const { spec, assetId } = this.d.checker.specOf(body);
    return this.run(p, spec, assetId, body.block_number ?? null, ctx, 'POST /v1/attestations/check');
  }

  async refresh(p: KeyPrincipal, assetId: string, blockNumber: number | undefined, ctx: Ctx) {
    const prev = await latestRecord(this.d.db, p.accountId, assetId);
    if (!prev) throw noRecord();
    return this.run(p, JSON.parse(prev.spec) as CheckSpec, assetId, blockNumber ?? null, ctx, 'POST /v1/attestations/:asset_id/refresh');
  }

  private async run(p: KeyPrincipal, spec: CheckSpec, assetId: string, pin: number | null, ctx: Ctx, route: string): Promise<{ view: Awaited<ReturnType<AttestationViews['record']>>; receipt: SignedReceipt }> {
    const price = this.d.config.attestationPriceMicroUsd;
    const recordId = newId('att_');
    const resource = new URL(route.replace(/^\S+ /, '').replace(':asset_id', encodeURIComponent(assetId)), this.d.publicUrl).toString();
    const settled = await this.d.metering.meter({ principal: p, requestId: ctx.requestId, runId: ctx.runId, maxCostMicroUsd: price, route, resource }, async () => {
      const read = await this.d.checker.read(spec, pin);
      const row = await this.store(p, spec, assetId, recordId, read, ctx.requestId);
      return {
        result: row,
        usage: { costMicroUsd: price, kind: 'attestation', units: { checks: 1 }, detail: { asset_id: assetId, record_id: recordId, version: row.version, status: row.status_at_check } },
      };
    });
    return { view: await this.views.record(settled.result, true), receipt: settled.receipt };
  }

  /** Signs and stores the next version, with its evidence and its webhook event, in one transaction. */
  private store(p: KeyPrincipal, spec: CheckSpec, assetId: string, recordId: string, read: Awaited<ReturnType<Checker['read']>>, receiptId: string): Promise<RecordRow> {
    const readings = judgeReadings(spec, read.readings);
    const { status, discrepancies, unavailable } = statusOf(spec, readings);
    const now = this.d.clock.now();
    const freshUntil = new Date(now.getTime() + spec.freshness_seconds * 1000);
    return this.d.db.transaction().execute(async (trx) => {
      // Versions of one account are numbered one at a time.
      await this.d.identity.lockAccount(trx, p.accountId);
      const prev = await latestRecord(trx, p.accountId, assetId);
      const { subject, freshness_seconds: _f, ...claims } = spec;
      const doc: AttestationDocument = {
        type: 'svc.attestation',
        format: 1,
        record_id: recordId,
        asset_id: assetId,
        version: (prev?.version ?? 0) + 1,
        supersedes: prev?.id ?? null,
        previous_sha256: prev?.document_sha256 ?? null,
        subject,
        block: read.block,
        claims,
        readings,
        status,
        discrepancies,
        unavailable,
        public_inputs: publicInputs(spec, status),
        methodology: METHODOLOGY,
        checked_at: now.toISOString(),
        freshness_seconds: spec.freshness_seconds,
        fresh_until: freshUntil.toISOString(),
        signer: this.d.signer.address,
      };
      const signed = this.d.signer.signDocument(doc);
      const row = await insertRecord(
        trx,
        {
          id: recordId,
          account_id: p.accountId,
          key_id: p.keyId,
          asset_id: assetId,
          version: doc.version,
          subject_ref: assetId,
          status_at_check: status,
          public_inputs: doc.public_inputs,
          spec: JSON.stringify(spec),
          document: signed.canonical,
          document_sha256: sha256Hex0x(signed.canonical),
          signature: signed.signature,
          receipt_id: receiptId,
          checked_at: now,
          fresh_until: freshUntil,
        },
        read.readings.map((r, idx) => ({ record_id: recordId, idx, name: r.name, request: r.exchange.request, body: r.exchange.body, sha256: r.exchange.sha256, read_at: r.exchange.read_at })),
      );
      const event = attestationEvent(prev ? (JSON.parse(prev.document) as AttestationDocument) : null, doc);
      if (event) await this.d.events.emit(p.accountId, event.type, event.data, { db: trx });
      return row;
    });
  }

  async current(accountId: string, assetId: string) {
    const row = await latestRecord(this.d.db, accountId, assetId);
    if (!row) throw noRecord();
    return this.views.record(row, true);
  }

  async history(accountId: string, assetId: string, limit: number) {
    const rows = await listRecords(this.d.db, accountId, assetId, limit);
    if (rows.length === 0) throw noRecord();
    return this.views.history(assetId, rows);
  }

  async evidence(accountId: string, assetId: string, version: number | undefined, withBodies: boolean) {
    const row = version === undefined ? await latestRecord(this.d.db, accountId, assetId) : await recordVersion(this.d.db, accountId, assetId, version);
    if (!row) throw noRecord();
    return this.views.evidence(row, await evidenceOf(this.d.db, row.id, withBodies), withBodies);
  }

  /** The newest version, of anyone, whose every input is public; else the same 404 for every reason. */
  async publicVerification(assetId: string) {
    const row = await newestPublic(this.d.db, assetId);
    if (!row) throw notFound('Public verification record');
    return this.views.public(row);
  }

}
