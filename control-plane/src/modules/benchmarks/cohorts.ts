/**
 * The comparison universes a portfolio can be benchmarked against, and the method results are computed
 * under. A result states its methodology version and is never recomputed under another: a refresh computes a
 * new version under the methodology current then.
 */
export const METHODOLOGY_VERSION = 'svc.benchmark/1';

export interface Cohort {
  id: string;
  name: string;
  description: string;
  currency: string;
  asset_classes: readonly string[];
}

export const COHORTS: readonly Cohort[] = [
  {
    id: 'multi-asset-usd',
    name: 'Multi-asset portfolios (USD)',
    description: 'Diversified portfolios valued in US dollars: allocation weights by broad asset class.',
    currency: 'USD',
    asset_classes: ['equity', 'fixed_income', 'cash', 'real_estate', 'commodities', 'private_credit', 'digital_assets', 'other'],
  },
  {
    id: 'digital-asset-treasuries',
    name: 'Digital-asset treasuries (USD)',
    description: 'Treasuries of companies, DAOs and funds holding digital assets, valued in US dollars.',
    currency: 'USD',
    asset_classes: ['btc', 'eth', 'stablecoins', 'other_tokens', 'cash', 'other'],
  },
];

export const cohortById = (id: string) => COHORTS.find((c) => c.id === id);

/** Width of a released weight bucket, in percentage points. */
export const BUCKET_PCT = 5;

/** Band edges above k for participant and holder counts. */
const EDGES = [10, 25, 50, 100, 250, 1000];

/** A count as a band: below k it is never told apart (nor zero from k - 1). */
export function band(n: number, k: number): string {
  if (n < k) return `fewer than ${k}`;
  const edges = [k, ...EDGES.filter((e) => e > k)];
  for (let i = 0; i < edges.length - 1; i++) if (n < edges[i + 1]!) return `${edges[i]}-${edges[i + 1]! - 1}`;
  return `${edges.at(-1)} or more`;
}

export function antiLeakage(k: number) {
  return {
    min_cohort_size: k,
    min_cell_holders: k,
    participant_counting: 'distinct accounts: each account counts once, with its latest portfolio whose holdings are still sealed',
    participant_bands: band(0, k) + ', then ' + [k, ...EDGES.filter((e) => e > k)].map((e, i, a) => (i < a.length - 1 ? `${e}-${a[i + 1]! - 1}` : `${e} or more`)).join(', '),
    weight_bucket_pct: BUCKET_PCT,
    figures_released: 'per asset class: the mean allocation weight over the release\'s participants, as a bucket of ' + BUCKET_PCT + ' percentage points, and the band of participants holding it',
    primary_suppression: `a class held by 1 to ${k - 1} participants is suppressed`,
    complementary_suppression: `when exactly one class is suppressed, the class with the smallest mean among those held by at least ${k} participants is suppressed too, so that no suppressed mean follows from the released ones and the 100% total`,
    release_snapshots: `peer figures are computed over a snapshot of participants and reused until at least ${k} participants have joined or left since; two different releases therefore differ by at least ${k} participants, and differencing them never isolates fewer`,
    totals_released: 'none: no sums, counts or values, only bucketed weights and banded counts',
  };
}

export const GUARANTEES_NOT_IMPLEMENTED = [
  'Differential privacy: no calibrated noise is added; protection rests on minimum sizes, bucketing, suppression and snapshots.',
  'Sybil resistance: one party holding several accounts counts as several participants.',
  'Collusion: k - 1 participants who pool their own portfolios can narrow down the remaining participant of a release.',
  'Own-contribution removal: a release includes the reader\'s own portfolio when it was a participant, so it describes at least k - 1 others.',
  'Verification of submitted holdings: values are taken as submitted.',
  'Confidential computing: holdings are sealed at rest under the gateway\'s key and opened in the gateway\'s process to compute; privacy_tier "confidential" (computation inside an attested enclave) answers 501.',
  'Membership privacy against the operator: the gateway operator can open sealed holdings until retention destroys them.',
];
