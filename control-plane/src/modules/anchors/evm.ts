import { createPublicClient, http, keccak256, type Hex, type PublicClient, type TransactionSerializable } from 'viem';
import { privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import type { AnchorChainConfig } from '../../config/anchors.ts';
import type { AnchorBackend, SignedAnchorTx, TxStatus } from './backend.ts';

/**
 * A batch root written to an EVM chain: a zero-value transaction from the anchoring account to itself whose
 * input is the 5-byte tag `0x7376636101` ("svca", version 1) followed by the 32-byte root. No contract is
 * needed; anyone verifies with `eth_getTransactionByHash` (input and sender) and `eth_getTransactionReceipt`
 * (status and block).
 */
export const ANCHOR_TAG = '0x7376636101';

export const anchorInput = (root: Hex): Hex => `${ANCHOR_TAG}${root.slice(2)}` as Hex;

export class EvmAnchorChain implements AnchorBackend {
  readonly type = 'evm' as const;
  readonly account: PrivateKeyAccount;
  private readonly client: PublicClient;

  constructor(
    readonly chain: AnchorChainConfig,
    privateKey: Hex,
    timeoutMs = 10_000,
  ) {
    this.account = privateKeyToAccount(privateKey);
    this.client = createPublicClient({ transport: http(chain.rpcUrl, { timeout: timeoutMs, retryCount: 0 }) }) as PublicClient;
  }

  get name(): string {
    return this.chain.name;
  }

  get chainId(): number {
    return this.chain.chainId;
  }

  get from(): string {
    return this.account.address.toLowerCase();
  }

  /** Signs (does not send) the anchor transaction of `root`, at the account's next nonce the node knows of. */
  async sign(root: Hex): Promise<SignedAnchorTx> {
    const from = this.account.address;
    const data = anchorInput(root);
    const [chainId, nonce, gas, fees] = await Promise.all([
      this.client.getChainId(),
      this.client.getTransactionCount({ address: from, blockTag: 'pending' }),
      this.client.estimateGas({ account: from, to: from, value: 0n, data }),
      this.client.estimateFeesPerGas(),
    ]);
    if (chainId !== this.chain.chainId) throw new Error(`the RPC of ${this.chain.name} serves chain ${chainId}, not ${this.chain.chainId}`);
    const tx: TransactionSerializable = { type: 'eip1559', chainId, nonce, to: from, value: 0n, data, gas, maxFeePerGas: fees.maxFeePerGas, maxPriorityFeePerGas: fees.maxPriorityFeePerGas };
    const raw = await this.account.signTransaction(tx);
    return { raw, hash: keccak256(raw), validity: nonce };
  }

  /** Sends a signed transaction; one the node already has is not an error. */
  async send(raw: string): Promise<void> {
    try {
      await this.client.sendRawTransaction({ serializedTransaction: raw as Hex });
    } catch (e) {
      const text = `${(e as Error).message} ${(e as { details?: string }).details ?? ''}`.toLowerCase();
      if (text.includes('already known') || text.includes('already imported') || text.includes('known transaction')) return;
      throw e;
    }
  }

  /** Where the transaction stands, counting `confirmations` (the block holding it is the first). */
  async status(hash: string): Promise<TxStatus> {
    const receipt = await this.client.getTransactionReceipt({ hash: hash as Hex }).catch((e: Error) => {
      if (e.name === 'TransactionReceiptNotFoundError') return null;
      throw e;
    });
    if (!receipt) {
      const pooled = await this.client.getTransaction({ hash: hash as Hex }).catch((e: Error) => {
        if (e.name === 'TransactionNotFoundError') return null;
        throw e;
      });
      return pooled ? { state: 'waiting' } : { state: 'unknown' };
    }
    const blockNumber = Number(receipt.blockNumber);
    if (receipt.status !== 'success') return { state: 'reverted', blockNumber };
    const head = Number(await this.client.getBlockNumber({ cacheTime: 0 }));
    if (head - blockNumber + 1 < this.chain.confirmations) return { state: 'waiting' };
    return { state: 'confirmed', blockNumber, blockHash: receipt.blockHash };
  }

  /** The chain has mined a transaction of the account at this nonce (so one stored with it was replaced). */
  async expired(nonce: number): Promise<boolean> {
    return (await this.client.getTransactionCount({ address: this.account.address, blockTag: 'latest' })) > nonce;
  }

  verify(a: { tx_hash: string | null; block_number: number | null; block_hash: string | null; from: string }): string {
    return (
      `On chain ${this.chain.chainId}: eth_getTransactionByHash(${a.tx_hash}) has from = ${a.from}, to = the same address, value 0, ` +
      `and input = ${ANCHOR_TAG} followed by the root's 32 bytes; eth_getTransactionReceipt shows status 1 in block ${a.block_number} (${a.block_hash}). ` +
      'Recompute the root from the leaves with the tree rules above.'
    );
  }
}
