import type { Kysely } from 'kysely';
import { isAddress } from '@solana/addresses';
import { ServiceError, checksumAddress, invalid, newId, notFound, sha256Hex, type Clock } from '@svc/shared';
import type { SupportConfig } from '../../config/support.ts';
import { isUniqueViolation } from '../../db/errors.ts';
import type { DB } from '../../db/schema.ts';
import type { ReceiptSigner } from '../money/signer.ts';
import { REGISTRATION_ONLY, base58Bytes, supportMessage, verifyEvm, verifySolana } from './message.ts';
import type { SolanaReader } from './solana.ts';
import { claimByAddress, claimByTx, insertClaim, insertNonce, nonceRow, purgeNonces, useNonce, type ClaimRow } from './store.ts';

export interface SupportDeps {
  db: Kysely<DB>;
  clock: Clock;
  signer: ReceiptSigner;
  config: SupportConfig;
  publicUrl: URL;
}

export interface ClaimIn {
  nonce: string;
  solana_signature: string;
  evm_signature: string;
  tx_signature: string;
}

const solanaAddress = (s: string, param: string) => {
  if (!isAddress(s)) throw invalid(`${param}: not a Solana address (base58 of 32 bytes)`, param.replace(/^[a-z]+\./, ''));
};

/**
 * Holder support claims: a single-use nonce and the exact message both wallets sign; a claim verified by an
 * ed25519 signature of the Solana key, an EIP-191 signature of the EVM key over the same message, and a
 * finalized Solana transaction that raised the Solana address's balance of the configured mint. Registered,
 * never approved: nothing is promised. Without a configured Solana RPC every route answers 501.
 */
export class SupportService {
  /** The cluster's reader (@solana/kit's RPC client), loaded on the first claim that needs it. */
  private reader: Promise<SolanaReader> | null = null;

  constructor(private readonly d: SupportDeps) {}

  /** 501 where no Solana RPC is configured. */
  assertConfigured(): { rpcUrl: string; mint: string } {
    if (!this.d.config.solana) {
      throw new ServiceError('not_enabled', 'Holder support claims are not available on this gateway: no Solana RPC is configured (the operator sets SVC_SUPPORT_SOLANA_RPC_URL and SVC_SUPPORT_TOKEN_MINT)', {
        reason: 'solana_rpc_not_configured',
      });
    }
    return this.d.config.solana;
  }

  async purgeNonces(): Promise<number> {
    return this.d.config.solana ? purgeNonces(this.d.db, this.d.clock.now()) : 0;
  }

  async nonce(solana: string, evm: string) {
    const { mint } = this.assertConfigured();
    solanaAddress(solana, 'body.solana_address');
    const now = this.d.clock.now();
    const expires = new Date(now.getTime() + this.d.config.nonceTtlSeconds * 1000);
    const nonce = newId('spn_', 24);
    const message = supportMessage({ origin: this.d.publicUrl.origin, solanaAddress: solana, evmAddress: evm, mint, nonce, issuedAt: now, expiresAt: expires });
    await insertNonce(this.d.db, { nonce, solana_address: solana, evm_address: evm.toLowerCase(), message, created_at: now, expires_at: expires, used_at: null });
    return { nonce, message, solana_address: solana, evm_address: checksumAddress(evm), mint, expires_at: expires.toISOString(), signing: 'The Solana wallet signs the UTF-8 bytes of message (ed25519, signature in base58); the EVM wallet signs it with personal_sign (EIP-191).' };
  }

  async register(input: ClaimIn) {
    const { mint } = this.assertConfigured();
    const now = this.d.clock.now();
    const n = await nonceRow(this.d.db, input.nonce);
    if (!n) throw new ServiceError('invalid_request', 'body.nonce: unknown nonce (mint one with POST /v1/support/nonce)', { param: 'nonce', reason: 'nonce_unknown' });
    if (n.used_at) throw new ServiceError('conflict', 'body.nonce: this nonce was used already; mint a new one', { param: 'nonce', reason: 'nonce_used' });
    if (n.expires_at.getTime() <= now.getTime()) throw new ServiceError('invalid_request', `body.nonce: this nonce expired at ${n.expires_at.toISOString()}; mint a new one`, { param: 'nonce', reason: 'nonce_expired' });
    if (!verifySolana(n.message, input.solana_signature, n.solana_address)) {
      throw new ServiceError('invalid_request', `body.solana_signature: not an ed25519 signature by ${n.solana_address} over this nonce's message`, { param: 'solana_signature', reason: 'bad_solana_signature' });
    }
    if (!verifyEvm(n.message, input.evm_signature, n.evm_address)) {
      throw new ServiceError('invalid_request', `body.evm_signature: not an EIP-191 signature by ${checksumAddress(n.evm_address)} over this nonce's message`, { param: 'evm_signature', reason: 'bad_evm_signature' });
    }
    if (!base58Bytes(input.tx_signature, 64)) throw invalid('body.tx_signature: not a Solana transaction signature (base58 of 64 bytes)', 'tx_signature');
    if (await claimByAddress(this.d.db, n.solana_address)) throw new ServiceError('conflict', `A claim is already registered for ${n.solana_address}`, { reason: 'already_registered' });
    if (await claimByTx(this.d.db, input.tx_signature)) throw new ServiceError('conflict', `Transaction ${input.tx_signature} backs another registered claim`, { reason: 'transaction_used' });
    const rpcUrl = this.d.config.solana!.rpcUrl;
    this.reader ??= import('./solana.ts').then((m) => new m.SolanaReader(rpcUrl));
    const raise = await (await this.reader).raise(input.tx_signature, n.solana_address, mint);
    const doc = this.d.signer.signDocument({
      v: 1,
      kind: 'support_claim_registration',
      solana_address: n.solana_address,
      evm_address: checksumAddress(n.evm_address),
      mint,
      tx_signature: input.tx_signature,
      slot: raise.slot.toString(),
      balance_before: raise.pre.toString(),
      balance_after: raise.post.toString(),
      decimals: raise.decimals,
      message_sha256: `0x${sha256Hex(n.message)}`,
      registered_at: now.toISOString(),
      notice: REGISTRATION_ONLY,
      signer: this.d.signer.address,
    });
    try {
      const row = await this.d.db.transaction().execute(async (trx) => {
        if (!(await useNonce(trx, n.nonce, now))) throw new ServiceError('conflict', 'body.nonce: this nonce was used already; mint a new one', { param: 'nonce', reason: 'nonce_used' });
        return insertClaim(trx, {
          solana_address: n.solana_address, evm_address: n.evm_address, mint, tx_signature: input.tx_signature, slot: raise.slot.toString(), block_time: raise.blockTime,
          decimals: raise.decimals, pre_amount: raise.pre.toString(), post_amount: raise.post.toString(), nonce: n.nonce, message: n.message,
          solana_signature: input.solana_signature, evm_signature: input.evm_signature, registration: doc.canonical, registration_signature: doc.signature, registered_at: now,
        });
      });
      return this.view(row);
    } catch (e) {
      if (isUniqueViolation(e)) throw new ServiceError('conflict', 'A claim for this Solana address or transaction was registered meanwhile', { reason: 'already_registered' });
      throw e;
    }
  }

  async get(address: string) {
    this.assertConfigured();
    solanaAddress(address, 'params.address');
    const row = await claimByAddress(this.d.db, address);
    if (!row) throw notFound('Support claim');
    return this.view(row);
  }

  private view(r: ClaimRow) {
    return {
      object: 'support_claim' as const,
      status: 'registered' as const,
      solana_address: r.solana_address,
      evm_address: checksumAddress(r.evm_address),
      mint: r.mint,
      tx_signature: r.tx_signature,
      slot: r.slot,
      block_time: r.block_time?.toISOString() ?? null,
      decimals: r.decimals,
      balance_before: r.pre_amount,
      balance_after: r.post_amount,
      raised: (BigInt(r.post_amount) - BigInt(r.pre_amount)).toString(),
      message: r.message,
      solana_signature: r.solana_signature,
      evm_signature: r.evm_signature,
      registered_at: r.registered_at.toISOString(),
      notice: REGISTRATION_ONLY,
      registration: { document: JSON.parse(r.registration) as Record<string, unknown>, canonical: r.registration, signature: r.registration_signature, signer: this.d.signer.address },
    };
  }
}
