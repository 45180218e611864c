import type { AnchorField } from '../anchors/service.ts';
import type { PassportRow } from './store.ts';

/** The registration-file type ERC-8004 ("Trustless Agents") defines. */
export const ERC8004_REGISTRATION_TYPE = 'https://eips.ethereum.org/EIPS/eip-8004#registration-v1';

export const ERC8004_STATEMENT =
  'No ERC-8004 registry contract is deployed for this gateway. This document only has the shape of an ERC-8004 registration file: ' +
  'it is served off-chain by the gateway, it was never registered in an Identity Registry, it has no agentId and no registry address, ' +
  'and `registrations` is empty. Its trust evidence is the signed passport and its public anchor, not an ERC-8004 registry.';

interface Links {
  url: string;
  proof_url: string;
  kya_url: string;
}

/**
 * The off-chain, ERC-8004-shaped identity document of a handle: the registration file fields (type, name,
 * description, services, x402Support, active, registrations, supportedTrust) filled from the passport, an
 * `erc8004` block that says plainly no registry contract backs it, and the passport's proof figures.
 */
export function identityDocument(row: PassportRow, links: Links, anchor: AnchorField, kya: { id: string } | null) {
  const services: Array<{ name: string; endpoint: string; version: string }> = [
    { name: 'passport', endpoint: links.url, version: String(row.version) },
    { name: 'passport-proof', endpoint: links.proof_url, version: String(row.version) },
  ];
  if (kya) services.push({ name: 'KYA', endpoint: links.kya_url, version: '1' });
  return {
    type: ERC8004_REGISTRATION_TYPE,
    name: row.handle,
    description:
      `Passport "${row.handle}" on this gateway: ${row.verified_runs} verified run${row.verified_runs === 1 ? '' : 's'} and ` +
      `${row.receipts} verified receipt${row.receipts === 1 ? '' : 's'} as of ${row.issued_at.toISOString()} (passport version ${row.version}), ` +
      'counted from signed receipts whose signatures and run chains recompute. The passport proof recomputes the commitment and its anchor offline.',
    services,
    x402Support: false,
    active: true,
    registrations: [] as Array<{ agentId: number; agentRegistry: string }>,
    supportedTrust: [] as string[],
    erc8004: {
      registry_contract_deployed: false as const,
      registered: false as const,
      statement: ERC8004_STATEMENT,
    },
    passport: {
      handle: row.handle,
      version: row.version,
      verified_runs: row.verified_runs,
      receipts: row.receipts,
      commitment: row.commitment,
      issued_at: row.issued_at.toISOString(),
      anchor_state: anchor.state,
      batch_root: anchor.root,
      proof_url: links.proof_url,
    },
    kya_credential_id: kya?.id ?? null,
  };
}
