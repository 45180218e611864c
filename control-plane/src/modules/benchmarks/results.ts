import type { Kysely } from 'kysely';
import { newId, sha256Hex0x, type Clock, type Sealer } from '@svc/shared';
import type { DB } from '../../db/schema.ts';
import type { ReceiptSigner } from '../money/signer.ts';
import { METHODOLOGY_VERSION, band, type Cohort } from './cohorts.ts';
import { computeRelease, membershipChange, pct, positionOf, weightsOf, type ReleaseFigure } from './release.ts';
import { insertRelease, insertResult, latestRelease, liveParticipants, type BenchmarkRow, type ResultRow } from './store.ts';

/** What is sealed: the holdings, and the salt of their sha256 commitment. */
export interface SealedHoldings {
  salt: string;
  holdings: Array<{ asset_class: string; value: string }>;
}

export const openHoldings = (sealer: Sealer, id: string, sealed: Uint8Array) => JSON.parse(sealer.open(sealed, `${id}:holdings`).toString('utf8')) as SealedHoldings;

export interface ResultDeps {
  clock: Clock;
  signer: ReceiptSigner;
  sealer: Sealer;
  k: number;
}

interface Peers {
  status: 'released' | 'suppressed';
  reason: string | null;
  release_id: string | null;
  participants_band: string;
  figures: ReleaseFigure[];
}

/**
 * The peer figures a result may show now, under the cohort's lock: suppressed while the cohort has fewer than
 * k participants; else the cohort's latest release, reused while fewer than k participants joined or left
 * since it was made (so two different releases always differ by at least k), or a new release over the
 * participants now.
 */
async function peersNow(trx: Kysely<DB>, cohort: Cohort, d: ResultDeps): Promise<Peers> {
  const now = d.clock.now();
  const members = await liveParticipants(trx, cohort.id, now);
  if (members.length < d.k) return { status: 'suppressed', reason: 'cohort_below_minimum', release_id: null, participants_band: band(members.length, d.k), figures: [] };
  const ids = members.map((m) => m.id).sort();
  const last = await latestRelease(trx, cohort.id);
  if (last && last.methodology_version === METHODOLOGY_VERSION && membershipChange(JSON.parse(last.members) as string[], ids) < d.k) {
    return { status: 'released', reason: null, release_id: last.id, participants_band: band(last.participants, d.k), figures: JSON.parse(last.figures) as ReleaseFigure[] };
  }
  const weights = members.map((m) => weightsOf(openHoldings(d.sealer, m.id, m.holdings_sealed).holdings, cohort.asset_classes));
  const figures = computeRelease(weights, cohort.asset_classes, d.k);
  const release = await insertRelease(trx, { id: newId('bmr_'), cohort: cohort.id, methodology_version: METHODOLOGY_VERSION, members: JSON.stringify(ids), figures: JSON.stringify(figures), participants: ids.length, created_at: now });
  return { status: 'released', reason: null, release_id: release.id, participants_band: band(ids.length, d.k), figures };
}

/** Computes, signs and stores the next result version of a benchmark (in the caller's transaction, under the cohort's lock). */
export async function storeResult(trx: Kysely<DB>, b: BenchmarkRow, holdings: SealedHoldings, cohort: Cohort, version: number, receiptId: string, d: ResultDeps): Promise<ResultRow> {
  const now = d.clock.now();
  const peers = await peersNow(trx, cohort, d);
  const own = weightsOf(holdings.holdings, cohort.asset_classes);
  const doc = {
    type: 'svc.benchmark_result' as const,
    format: 1 as const,
    benchmark_id: b.id,
    version,
    methodology_version: METHODOLOGY_VERSION,
    cohort: cohort.id,
    holdings_sha256: b.holdings_sha256,
    own: cohort.asset_classes.map((c) => {
      const f = peers.figures.find((x) => x.asset_class === c);
      return { asset_class: c, weight_pct: pct(own[c] ?? 0), peer_position: f?.status === 'released' ? positionOf(own[c] ?? 0, f.mean_weight_bucket) : null };
    }),
    peers,
    retain_until: b.retain_until.toISOString(),
    computed_at: now.toISOString(),
    signer: d.signer.address,
  };
  const signed = d.signer.signDocument(doc);
  return insertResult(trx, {
    id: newId('bmres_'),
    benchmark_id: b.id,
    version,
    methodology_version: METHODOLOGY_VERSION,
    release_id: peers.release_id,
    document: signed.canonical,
    document_sha256: sha256Hex0x(signed.canonical),
    signature: signed.signature,
    receipt_id: receiptId,
    computed_at: now,
  });
}
