import {
  appendTransactionMessageInstruction,
  createKeyPairSignerFromBytes,
  createSolanaRpc,
  createTransactionMessage,
  getBase64EncodedWireTransaction,
  getSignatureFromTransaction,
  pipe,
  setTransactionMessageFeePayerSigner,
  setTransactionMessageLifetimeUsingBlockhash,
  signTransactionMessageWithSigners,
  type Base64EncodedWireTransaction,
  type KeyPairSigner,
  type Signature,
} from '@solana/kit';
import { getAddMemoInstruction, LEGACY_MEMO_PROGRAM_ADDRESS_V3 } from '@solana-program/memo';
import type { AnchorSolanaConfig } from '../../config/anchors.ts';
import type { AnchorBackend, SignedAnchorTx, TxStatus } from './backend.ts';

/**
 * A batch root written to Solana: a transaction of the SPL Memo program v3 (MemoSq4g..., deployed on every
 * cluster) whose memo is
 * `svc-anchor:v1:` followed by the root in 64 lowercase hex digits, signed and paid for by the anchoring
 * keypair. Anyone verifies with `getTransaction(signature)`: the memo instruction's data and the fee payer.
 */
export const MEMO_PREFIX = 'svc-anchor:v1:';
export const anchorMemo = (root: string) => `${MEMO_PREFIX}${root.slice(2).toLowerCase()}`;

type Rpc = ReturnType<typeof createSolanaRpc>;

export class SolanaAnchor implements AnchorBackend {
  readonly type = 'solana' as const;
  readonly chainId = 0;
  private readonly rpc: Rpc;

  private constructor(
    readonly config: AnchorSolanaConfig,
    private readonly signer: KeyPairSigner,
  ) {
    this.rpc = createSolanaRpc(config.rpcUrl);
  }

  /** From the 64 bytes of a solana-keygen keypair (secret key then public key). */
  static async create(config: AnchorSolanaConfig): Promise<SolanaAnchor> {
    return new SolanaAnchor(config, await createKeyPairSignerFromBytes(config.keypair));
  }

  get name(): string {
    return this.config.name;
  }

  get from(): string {
    return this.signer.address;
  }

  async sign(root: `0x${string}`): Promise<SignedAnchorTx> {
    const { value: blockhash } = await this.rpc.getLatestBlockhash({ commitment: 'confirmed' }).send();
    const message = pipe(
      createTransactionMessage({ version: 'legacy' }),
      (m) => setTransactionMessageFeePayerSigner(this.signer, m),
      (m) => setTransactionMessageLifetimeUsingBlockhash(blockhash, m),
      (m) => appendTransactionMessageInstruction(getAddMemoInstruction({ memo: anchorMemo(root) }, { programAddress: LEGACY_MEMO_PROGRAM_ADDRESS_V3 }), m),
    );
    const tx = await signTransactionMessageWithSigners(message);
    return { raw: getBase64EncodedWireTransaction(tx), hash: getSignatureFromTransaction(tx), validity: Number(blockhash.lastValidBlockHeight) };
  }

  async send(raw: string): Promise<void> {
    try {
      await this.rpc.sendTransaction(raw as Base64EncodedWireTransaction, { encoding: 'base64', preflightCommitment: 'confirmed' }).send();
    } catch (e) {
      const text = `${(e as Error).message} ${JSON.stringify((e as { context?: unknown }).context ?? '')}`.toLowerCase();
      if (text.includes('already been processed') || text.includes('alreadyprocessed')) return;
      throw e;
    }
  }

  async status(hash: string): Promise<TxStatus> {
    const { value } = await this.rpc.getSignatureStatuses([hash as Signature], { searchTransactionHistory: true }).send();
    const st = value[0];
    if (!st) return { state: 'unknown' };
    const slot = Number(st.slot);
    if (st.err) return { state: 'reverted', blockNumber: slot };
    const done = this.config.commitment === 'finalized' ? st.confirmationStatus === 'finalized' : st.confirmationStatus === 'confirmed' || st.confirmationStatus === 'finalized';
    return done ? { state: 'confirmed', blockNumber: slot, blockHash: null } : { state: 'waiting' };
  }

  /** The blockhash it was signed with has expired: the cluster will never include it. */
  async expired(lastValidBlockHeight: number): Promise<boolean> {
    return Number(await this.rpc.getBlockHeight({ commitment: 'confirmed' }).send()) > lastValidBlockHeight;
  }

  verify(a: { tx_hash: string | null; block_number: number | null; from: string; root: string }): string {
    return (
      `On Solana (${this.config.name}): getTransaction("${a.tx_hash}") in slot ${a.block_number} has fee payer and signer ${a.from} ` +
      `and an instruction of the Memo program (MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr) whose data is the UTF-8 text "${anchorMemo(a.root)}". ` +
      'Recompute the root from the leaves with the tree rules above.'
    );
  }
}
