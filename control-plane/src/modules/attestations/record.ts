import { cmp, parseDec } from '../nav/decimal.ts';
import type { Reading } from './token.ts';

export type AttestationStatus = 'VERIFIED' | 'DISCREPANCY' | 'UNAVAILABLE';
export type ReportedStatus = AttestationStatus | 'STALE';

/** How a record is read and judged; a record states the one it was made under. */
export const METHODOLOGY = 'svc.attestation.evm-token/1';
export const ANCHOR_KIND = 'attestation';

export const DISCLAIMER =
  'An attestation states what the named sources answered at the pinned block and whether that matches what was claimed, signed by this gateway. ' +
  'It is not an audit, a legal opinion or a guarantee of reserves: an HTTPS figure is what its publisher served, and chain facts are only as final as the pinned block.';

/** What is checked, kept with every record so a refresh runs the same check again. */
export interface CheckSpec {
  subject: { kind: 'evm_token'; chain: string; chain_id: number; address: string };
  claims: { code_hash: string | null; name: string | null; symbol: string | null; decimals: number | null; total_supply: string | null };
  reserves: Array<{ label: string; address: string; token: string | null; claimed_balance: string | null; min_balance: string | null }>;
  reserve_source: { url: string; json_pointer: string; label: string; claimed_figure: string | null; min_figure: string | null } | null;
  freshness_seconds: number;
}

/** One reading as the signed record states it. */
export interface RecordReading {
  name: string;
  kind: 'evm_rpc' | 'https';
  pinned: boolean;
  request: string;
  value: string | number | null;
  outcome: Reading['outcome'];
  error: string | null;
  claimed: string | number | null;
  check: 'equals' | 'at_least' | null;
  matches: boolean | null;
  sha256: string | null;
  bytes: number;
  read_at: string;
}

export interface AttestationDocument {
  type: 'svc.attestation';
  format: 1;
  record_id: string;
  asset_id: string;
  version: number;
  supersedes: string | null;
  previous_sha256: string | null;
  subject: CheckSpec['subject'];
  block: { number: number; hash: string; timestamp: number } | null;
  claims: Omit<CheckSpec, 'subject' | 'freshness_seconds'>;
  readings: RecordReading[];
  status: AttestationStatus;
  discrepancies: string[];
  unavailable: string[];
  public_inputs: boolean;
  methodology: string;
  checked_at: string;
  freshness_seconds: number;
  fresh_until: string;
  signer: string;
}

/** The asset id of an EVM token: its CAIP-10 account id (`eip155:<chain id>:<address>`). */
export const evmAssetId = (chainId: number, address: string) => `eip155:${chainId}:${address.toLowerCase()}`;

/** The claim a reading is judged against, if any. */
function claimOf(spec: CheckSpec, name: string): { claimed: string | number; check: 'equals' | 'at_least' } | null {
  const c = spec.claims;
  const eq = (v: string | number | null) => (v === null ? null : { claimed: v, check: 'equals' as const });
  switch (name) {
    case 'code_hash':
      return eq(c.code_hash);
    case 'name':
      return eq(c.name);
    case 'symbol':
      return eq(c.symbol);
    case 'decimals':
      return eq(c.decimals);
    case 'total_supply':
      return eq(c.total_supply);
    case 'reserve_figure': {
      const s = spec.reserve_source;
      if (!s) return null;
      return s.claimed_figure !== null ? eq(s.claimed_figure) : s.min_figure !== null ? { claimed: s.min_figure, check: 'at_least' } : null;
    }
  }
  if (name.startsWith('reserve:')) {
    const r = spec.reserves.find((x) => `reserve:${x.label}` === name);
    if (!r) return null;
    return r.claimed_balance !== null ? eq(r.claimed_balance) : r.min_balance !== null ? { claimed: r.min_balance, check: 'at_least' } : null;
  }
  return null;
}

function judge(name: string, value: string | number | null, outcome: Reading['outcome'], claim: { claimed: string | number; check: 'equals' | 'at_least' }): boolean | null {
  if (outcome === 'unavailable') return null;
  if (outcome === 'absent' || value === null) return false;
  if (name === 'name' || name === 'symbol' || name === 'decimals') return value === claim.claimed;
  if (name === 'code_hash') return String(value).toLowerCase() === String(claim.claimed).toLowerCase();
  // Figures: total supply, reserve balances, the HTTPS reserve figure, compared as exact decimals.
  const c = cmp(parseDec(String(value)), parseDec(String(claim.claimed)));
  return claim.check === 'at_least' ? c >= 0 : c === 0;
}

/** The readings as the record states them, each judged against its claim. */
export function judgeReadings(spec: CheckSpec, readings: Reading[]): RecordReading[] {
  return readings.map((r) => {
    const claim = claimOf(spec, r.name);
    return {
      name: r.name,
      kind: r.kind,
      pinned: r.pinned,
      request: r.exchange.request,
      value: r.value,
      outcome: r.outcome,
      error: r.error,
      claimed: claim?.claimed ?? null,
      check: claim?.check ?? null,
      matches: claim ? judge(r.name, r.value, r.outcome, claim) : null,
      sha256: r.exchange.sha256,
      bytes: r.exchange.body?.length ?? 0,
      read_at: r.exchange.read_at.toISOString(),
    };
  });
}

/**
 * DISCREPANCY when any claimed fact differs from what was read (or the contract has no such fact); else
 * UNAVAILABLE when any source could not be read (or a claimed fact was never reached); else VERIFIED.
 */
export function statusOf(spec: CheckSpec, readings: RecordReading[]): { status: AttestationStatus; discrepancies: string[]; unavailable: string[] } {
  const discrepancies = readings.filter((r) => r.matches === false).map((r) => r.name);
  const unavailable = readings.filter((r) => r.outcome === 'unavailable').map((r) => r.name);
  const read = new Set(readings.map((r) => r.name));
  const claimedNames = [
    ...(['code_hash', 'name', 'symbol', 'decimals', 'total_supply'] as const).filter((k) => spec.claims[k] !== null),
    ...spec.reserves.filter((r) => r.claimed_balance !== null || r.min_balance !== null).map((r) => `reserve:${r.label}`),
    ...(spec.reserve_source && (spec.reserve_source.claimed_figure !== null || spec.reserve_source.min_figure !== null) ? ['reserve_figure'] : []),
  ];
  // Nothing is verified of a token whose code was not read (its chain unreachable or unconfigured).
  for (const n of ['code_hash', ...claimedNames]) if (!read.has(n) && !unavailable.includes(n)) unavailable.push(n);
  const status = discrepancies.length ? 'DISCREPANCY' : unavailable.length ? 'UNAVAILABLE' : 'VERIFIED';
  return { status, discrepancies, unavailable };
}

/** Every input can be read again by anyone from the chain (no HTTPS figure), and something was read. */
export const publicInputs = (spec: CheckSpec, status: AttestationStatus) => spec.reserve_source === null && status !== 'UNAVAILABLE';

/** The status a read reports: STALE once the freshness window has passed, else the status at check. */
export const reportedStatus = (status: AttestationStatus, freshUntil: Date, now: Date): ReportedStatus => (now.getTime() > freshUntil.getTime() ? 'STALE' : status);
