import { createWalletClient, defineChain, http, parseEventLogs, publicActions, erc20Abi, type Hex, type TransactionReceipt } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { toFacilitatorEvmSigner } from '@x402/evm';
import { ExactEvmScheme } from '@x402/evm/exact/facilitator';
import { ServiceError } from '@svc/shared';
import type { MarketX402Config } from '../../config/market.ts';
import type { Payment } from './payment.ts';
import { PaymentRefused, reasonOf, SettlementUnconfirmed, type Settlement } from './payment.ts';
import { v2Network, type RequirementsV2 } from './terms.ts';

/** @x402/evm's settle answer when its wait for the receipt timed out (its ErrSettlementPending, not exported). */
const LIBRARY_SETTLEMENT_PENDING = 'settlement_pending';

/**
 * The gateway as x402 facilitator on the configured chain, through @x402/evm's `exact` scheme: it verifies a
 * buyer's EIP-3009 authorization (the EIP-712 signature under the token's domain, the payee, the amount, the
 * validity window and, by simulating it, the nonce and the balance) and submits it with its own key, paying
 * the gas. The tokens move from buyer to seller in that one transaction; the gateway never holds them.
 * Submissions of this process go one at a time (one account's transaction nonces), and a settlement counts
 * once the configured confirmations are in.
 */
export class Facilitator {
  private readonly scheme: ExactEvmScheme;
  private readonly client;
  private queue: Promise<unknown> = Promise.resolve();
  private chainChecked = false;

  constructor(
    private readonly x: MarketX402Config,
    key: Hex,
    private readonly timeoutMs = 120_000,
  ) {
    const c = x.chain;
    const chain = defineChain({ id: c.chainId, name: c.name, nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 }, rpcUrls: { default: { http: [c.rpcUrl] } } });
    this.client = createWalletClient({ account: privateKeyToAccount(key), chain, transport: http(c.rpcUrl, { timeout: 15_000, retryCount: 1 }), pollingInterval: 200 }).extend(publicActions);
    this.scheme = new ExactEvmScheme(toFacilitatorEvmSigner(this.client as never, { confirmationTimeoutMs: timeoutMs }));
  }

  get address(): Hex {
    return this.client.account.address;
  }

  /** The library's payload and requirements for a payment read from either version (the authorization signs the same). */
  private library(p: Payment, req: RequirementsV2) {
    const payload = { x402Version: 2, accepted: req, payload: { authorization: p.authorization, signature: p.signature } };
    return { payload: payload as never, requirements: req as never };
  }

  private async checkChain(): Promise<void> {
    if (this.chainChecked) return;
    const id = await this.rpc('eth_chainId', () => this.client.getChainId());
    if (id !== this.x.chain.chainId) throw new ServiceError('upstream_error', `The RPC node configured for chain ${this.x.chain.name} serves chain id ${id}, not ${this.x.chain.chainId}; no payment is taken on it`);
    this.chainChecked = true;
  }

  /** Verifies the authorization against the requirements (signature, domain, nonce unused on chain, balance); throws PaymentRefused. */
  async verify(p: Payment, req: RequirementsV2): Promise<void> {
    await this.checkChain();
    const { payload, requirements } = this.library(p, req);
    const v = await this.rpc('verify', () => this.scheme.verify(payload, requirements));
    if (!v.isValid) throw new PaymentRefused(reasonOf(v.invalidReason, v.invalidMessage), describe(v.invalidReason, v.invalidMessage));
  }

  /** Submits the authorization and waits for the configured confirmations; one submission at a time. */
  settle(p: Payment, req: RequirementsV2): Promise<Settlement> {
    const run = this.queue.then(() => this.settleNow(p, req));
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async settleNow(p: Payment, req: RequirementsV2): Promise<Settlement> {
    const { payload, requirements } = this.library(p, req);
    const s = await this.rpc('settle', () => this.scheme.settle(payload, requirements));
    const tx = s.transaction as Hex;
    if (!tx) throw new PaymentRefused(reasonOf(s.errorReason, s.errorMessage), `the authorization was not submitted: ${describe(s.errorReason, s.errorMessage)}`);
    // The library waited for the receipt already (confirmationTimeoutMs): waiting again would double the wait.
    if (s.errorReason === LIBRARY_SETTLEMENT_PENDING) throw new SettlementUnconfirmed(tx, `transaction ${tx} was submitted but not mined within ${this.timeoutMs} ms`);
    let receipt: TransactionReceipt;
    try {
      receipt = await this.client.waitForTransactionReceipt({ hash: tx, confirmations: this.x.chain.confirmations, timeout: this.timeoutMs, pollingInterval: 200 });
    } catch (e) {
      throw new SettlementUnconfirmed(tx, `transaction ${tx} was submitted but not confirmed in time (${(e as Error).name})`);
    }
    return this.settled(tx, receipt, p, reasonOf(s.errorReason));
  }

  /**
   * A settlement left unconfirmed, looked up again without waiting: null while the transaction is not mined
   * or lacks the configured confirmations; the settlement once it has them; PaymentRefused when it reverted or
   * moved something else.
   */
  async recheck(tx: Hex, p: Payment): Promise<Settlement | null> {
    await this.checkChain();
    const receipt = await this.rpc('eth_getTransactionReceipt', () => this.client.getTransactionReceipt({ hash: tx }).catch((e: Error) => (e.name === 'TransactionReceiptNotFoundError' ? null : Promise.reject(e))));
    if (!receipt) return null;
    const head = await this.rpc('eth_blockNumber', () => this.client.getBlockNumber({ cacheTime: 0 }));
    if (head - receipt.blockNumber + 1n < BigInt(this.x.chain.confirmations)) return null;
    return this.settled(tx, receipt, p, reasonOf(undefined));
  }

  /** A mined settlement: it succeeded and carries the authorized Transfer, or PaymentRefused. */
  private settled(tx: Hex, receipt: TransactionReceipt, p: Payment, revertReason: string): Settlement {
    if (receipt.status !== 'success') throw new PaymentRefused(revertReason, `transaction ${tx} reverted; no tokens moved`);
    const a = p.authorization;
    const moved = parseEventLogs({ abi: erc20Abi, eventName: 'Transfer', logs: receipt.logs }).some(
      (l) => l.address.toLowerCase() === this.x.asset && l.args.from.toLowerCase() === a.from.toLowerCase() && l.args.to.toLowerCase() === a.to.toLowerCase() && l.args.value === BigInt(a.value),
    );
    if (!moved) throw new PaymentRefused('transfer_mismatch', `transaction ${tx} carries no Transfer of ${a.value} from ${a.from} to ${a.to}`);
    return { txHash: tx, blockNumber: Number(receipt.blockNumber) };
  }

  private async rpc<T>(what: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (e) {
      if (e instanceof ServiceError || e instanceof PaymentRefused || e instanceof SettlementUnconfirmed) throw e;
      throw new ServiceError('upstream_error', `The RPC node of chain ${this.x.chain.name} failed on ${what} (${(e as Error).name}); no payment was taken, try again`);
    }
  }

  static network(x: MarketX402Config): string {
    return v2Network(x.chain.chainId);
  }
}

function describe(reason: string | undefined, message: string | undefined): string {
  const r = reason ?? 'invalid';
  if (/signature/.test(r)) return 'the signature does not recover to the payer under the token\'s EIP-712 domain (name, version, chain id, contract)';
  const first = (message ?? '').split('\n').find((l) => /reverted|reason|Details/.test(l)) ?? '';
  return first ? `${r}: ${first.trim().slice(0, 200)}` : r;
}
