import { canonicalize, checksumAddress, invalid, recoverPersonalMessage, sha256Hex } from '@svc/shared';

export const SCHEME = 'eip191-personal_sign/rfc8785';

export const TRUST_MODEL =
  "Each attestation is a document in RFC 8785 canonical JSON signed by the gateway's receipt signer (EIP-191; GET /v1/receipts/pubkey, " +
  'POST /v1/receipts/verify or any Ethereum library check it). The gateway signature says that this role-holder recorded it at this time, ' +
  "as event chain_seq of the asset's hash chain; where `attester` is set, the attester's own wallet signed `attester.message` (EIP-191), " +
  'which names the asset, the role and the sha256 of the statement or the figures, so the attester vouches for it with their key, not ' +
  'only the gateway. Neither signature makes a statement or a figure true; statements are sealed at rest and shown to the issuer, ' +
  'holders and attesters only. A revoked attester\'s attestations stand as recorded.';

const sha = (text: string) => `0x${sha256Hex(Buffer.from(text, 'utf8'))}`;

/** What an attester's wallet signs about a statement: computable before submitting (docs/vault.md). */
export function statementMessage(assetId: string, role: string, statement: string): string {
  return canonicalize({ type: 'svc.vault_attester_statement', version: 1, asset_id: assetId, role, kind: 'statement', statement_sha256: sha(statement) });
}

export interface Figure {
  kind: 'nav' | 'reserves';
  value_micro_usd: number;
  as_of: string;
  basis: string | null;
}

/** What a recorder's wallet signs about a NAV or reserves figure. */
export function figureMessage(assetId: string, role: string, f: Figure): string {
  return canonicalize({
    type: 'svc.vault_attester_statement',
    version: 1,
    asset_id: assetId,
    role,
    kind: f.kind,
    value_micro_usd: f.value_micro_usd,
    as_of: f.as_of,
    basis_sha256: f.basis === null ? null : sha(f.basis),
  });
}

export const statementSha = sha;

/**
 * The wallet that signed `message`, which must be one of `allowed` (lower-case); each refusal is a 400
 * naming attester_signature, and nothing is written.
 */
export function walletSigner(message: string, signature: string, allowed: string[]): { address: string; message: string; signature: string } {
  const recovered = recoverPersonalMessage(message, signature);
  if (!recovered) throw invalid('attester_signature: not an EIP-191 signature (0x and 65 bytes of hex)', 'attester_signature');
  if (!allowed.includes(recovered.toLowerCase())) {
    throw invalid(
      `attester_signature: recovers to ${checksumAddress(recovered)}, which is not the attester's wallet; sign the exact message (the attester_message rule in docs/vault.md) with ${allowed.length ? allowed.map((a) => checksumAddress(a)).join(' or ') : 'a wallet linked to your account'}`,
      'attester_signature',
    );
  }
  return { address: checksumAddress(recovered), message, signature };
}
