import { ServiceError, checksumAddress, invalid, newId } from '@svc/shared';
import type { VaultCore } from './core.ts';
import { SCHEME } from './attest-docs.ts';

export const DISCLOSES =
  'Only that the wallet named in subject held at least amount_micro_usd of the asset asset_id at as_of, when its chain stood at chain.length ' +
  'events with head chain.head. Not the amount held, not the asset\'s name or terms, not the other holders.';

/**
 * Selective-disclosure proofs: a signed statement that the caller (named by one of their wallets) holds at
 * least N of an asset now, revealing nothing else. Signed by the receipt signer over RFC 8785 canonical
 * JSON, so POST /v1/receipts/verify and any Ethereum library verify it. Read under the asset row's lock, so
 * the position and the chain head are of one moment. Nothing is stored.
 */
export class ProofsService {
  constructor(private readonly core: VaultCore) {}

  async holdsAtLeast(accountId: string, sessionWallet: string | null, input: { asset_id: string; amount_micro_usd: number; wallet?: string | undefined }) {
    const core = this.core;
    const wallets = await core.wallets(accountId);
    const wallet = (input.wallet ?? sessionWallet ?? wallets[0] ?? '').toLowerCase();
    if (!wallets.includes(wallet)) throw invalid('wallet: not a wallet linked to your account (GET /v1/auth/wallets)', 'wallet');
    const doc = await core.change(input.asset_id, accountId, 'holder', async (c) => {
      const held = await core.position(c.trx, c.asset.id, accountId);
      if (held < input.amount_micro_usd) {
        throw new ServiceError('conflict', `amount_micro_usd: your position in this asset is below ${input.amount_micro_usd}; nothing was signed`, { param: 'amount_micro_usd', reason: 'below_threshold' });
      }
      return {
        type: 'svc.vault_disclosure' as const,
        version: 1 as const,
        proof_id: newId('vprf_'),
        statement: 'holds_at_least' as const,
        subject: { wallet: checksumAddress(wallet) },
        asset_id: c.asset.id,
        amount_micro_usd: input.amount_micro_usd,
        as_of: c.now.toISOString(),
        chain: { length: c.asset.chain_length, head: c.asset.chain_head },
        discloses: DISCLOSES,
        signer: core.d.signer.address,
      };
    });
    const s = core.d.signer.signDocument(doc);
    return { proof: s.document, canonical: s.canonical, signature: s.signature, signer: s.signer, scheme: SCHEME, verify: 'POST /v1/receipts/verify with {"receipt": canonical, "signature": signature}; or recover the EIP-191 signer of canonical with any Ethereum library and compare it with GET /v1/receipts/pubkey' };
  }
}
