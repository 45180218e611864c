import { BUCKET_PCT, band } from './cohorts.ts';
import { decToString, div, parseDec, sum } from '../nav/decimal.ts';

/** Allocation weights of one portfolio, in parts per million of its total, by asset class. */
export type Weights = Record<string, number>;

/** One asset class of a release: released (bucketed mean weight, banded holders) or suppressed (nothing shown). */
export type ReleaseFigure =
  | { asset_class: string; status: 'released'; mean_weight_bucket: string; holders_band: string }
  | { asset_class: string; status: 'suppressed'; mean_weight_bucket: null; holders_band: null };

const PPM = 1_000_000;
const BUCKET_PPM = (BUCKET_PCT * PPM) / 100;

/** Weights of holdings by class, each rounded half to even to a part per million of the total value. */
export function weightsOf(holdings: Array<{ asset_class: string; value: string }>, classes: readonly string[]): Weights {
  const total = sum(holdings.map((h) => parseDec(h.value)));
  const out: Weights = {};
  for (const c of classes) {
    const v = sum(holdings.filter((h) => h.asset_class === c).map((h) => parseDec(h.value)));
    out[c] = Number(div(v, total, 6).n); // a fraction at 6 places is parts per million
  }
  return out;
}

/** A weight in ppm as a percentage string with up to 4 places ("12.3456"). */
export const pct = (ppm: number) => decToString({ n: BigInt(ppm), scale: 4 });

/** The bucket of a weight in ppm: "20-25%" (the last one holds 100%). */
export function bucketOf(ppm: number): { label: string; lo: number; hi: number } {
  const i = Math.min(100 / BUCKET_PCT - 1, Math.floor(ppm / BUCKET_PPM));
  return { label: `${i * BUCKET_PCT}-${(i + 1) * BUCKET_PCT}%`, lo: i * BUCKET_PPM, hi: (i + 1) * BUCKET_PPM };
}

/**
 * The peer figures of a set of participants (at least k): for each class the mean weight as a bucket and the
 * band of participants holding it. Primary suppression: a class held by 1 to k-1 participants. Complementary
 * suppression: when exactly one class is suppressed its mean would follow from the others (the means add up to
 * 100%), so the class with the smallest mean among those held by at least k participants is suppressed too.
 */
export function computeRelease(members: Weights[], classes: readonly string[], k: number): ReleaseFigure[] {
  if (members.length < k) throw new Error(`a release needs at least ${k} participants`);
  const stats = classes.map((c) => {
    const holders = members.filter((m) => (m[c] ?? 0) > 0).length;
    const mean = Math.floor(members.reduce((n, m) => n + (m[c] ?? 0), 0) / members.length);
    return { c, holders, mean };
  });
  const suppressed = new Set(stats.filter((s) => s.holders > 0 && s.holders < k).map((s) => s.c));
  if (suppressed.size === 1) {
    const candidates = stats.filter((s) => !suppressed.has(s.c) && s.holders >= k).sort((a, b) => a.mean - b.mean);
    if (candidates[0]) suppressed.add(candidates[0].c);
  }
  return stats.map((s) =>
    suppressed.has(s.c)
      ? { asset_class: s.c, status: 'suppressed' as const, mean_weight_bucket: null, holders_band: null }
      : { asset_class: s.c, status: 'released' as const, mean_weight_bucket: bucketOf(s.mean).label, holders_band: s.holders === 0 ? 'none' : band(s.holders, k) },
  );
}

/** How many participants joined or left between two member sets. */
export function membershipChange(before: readonly string[], after: readonly string[]): number {
  const a = new Set(before);
  const b = new Set(after);
  return [...a].filter((x) => !b.has(x)).length + [...b].filter((x) => !a.has(x)).length;
}

/** Where a weight sits against a released bucket. */
export function positionOf(ppm: number, bucket: string): 'below' | 'within' | 'above' {
  const m = /^(\d+)-(\d+)%$/.exec(bucket);
  const lo = (Number(m?.[1]) * PPM) / 100;
  const hi = (Number(m?.[2]) * PPM) / 100;
  if (ppm < lo) return 'below';
  if (ppm > hi || (ppm === hi && hi < PPM)) return 'above';
  return 'within';
}
