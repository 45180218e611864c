import type { Clock } from '@svc/shared';
import type { AssetsConfig } from '../../config/assets.ts';
import type { ChainRegistry } from '../billing/chains.ts';
import { readFigure } from '../attestations/https-source.ts';
import type { SelfAddress } from '../webhooks/url.ts';
import { bookEvidence, saltedSha256, type Book, type EvidenceItem, type Observed } from './compute.ts';
import { readSupply } from './supply.ts';

export interface ObserveDeps {
  clock: Clock;
  chains: ChainRegistry;
  config: AssetsConfig;
  self: SelfAddress;
}

/**
 * Observes a book's inputs now: declared prices as declared (dated by their price_as_of), HTTPS prices read
 * again, the share count declared or read from the token's supply on chain. Sources that cannot be read
 * leave their input missing. Returns what was observed and the evidence of every input, the book first.
 */
export async function observe(book: Book, d: ObserveDeps): Promise<Observed & { evidence: EvidenceItem[] }> {
  const now = d.clock.now();
  const prices = await Promise.all(
    book.holdings.map(async (h, i) => {
      const input = `holdings[${i}].price`;
      if (h.price !== null) {
        const at = h.price_as_of ?? now.toISOString();
        return { value: h.price, observed_at: new Date(at), evidence: { input, source_kind: 'declared' as const, label: input, retrieved_at: at, sha256: saltedSha256(book.salt, { input, price: h.price, as_of: at }), salted: true } };
      }
      if (h.price_source) {
        const r = await readFigure(h.price_source, { self: d.self, clock: d.clock, timeoutMs: d.config.sourceTimeoutMs, enabled: d.config.httpsSources });
        return { value: r.value, observed_at: r.exchange.read_at, evidence: { input, source_kind: 'https' as const, label: h.price_source.label, retrieved_at: r.exchange.read_at.toISOString(), sha256: r.exchange.sha256, salted: false } };
      }
      return { value: null, observed_at: null, evidence: { input, source_kind: 'declared' as const, label: input, retrieved_at: now.toISOString(), sha256: null, salted: false } };
    }),
  );
  let shares: Observed['shares'];
  if (book.supply) {
    const s = await readSupply(book.supply, d.chains.find(`eip155:${book.supply.chain_id}`), d.clock, d.config.sourceTimeoutMs);
    shares = { value: s.shares, evidence: s.evidence };
  } else {
    shares = { value: book.shares_outstanding, evidence: [] };
  }
  return { prices, shares, evidence: [bookEvidence(book, now), ...prices.map((p) => p.evidence), ...shares.evidence] };
}
