import type { BillingConfig } from '../../config.ts';

/**
 * x402 (version 1) payment terms for a 402 `insufficient_credit`: pay the treasury in USDT on chain, then
 * submit the transfer as a deposit. Amounts are strings in token base units. None (an empty object) where no
 * treasury or USDT contract is configured: terms that name nobody to pay are no terms. (Enforced billing
 * requires both, so metered 402s always carry them; a plan fee can be refused without them.)
 */
export function paymentTerms(cfg: BillingConfig, opts: { shortfallMicroUsd: number; resource: string; description: string }) {
  if (!cfg.treasury || !cfg.usdtContract) return {};
  const micro = BigInt(Math.max(1, opts.shortfallMicroUsd));
  const scale = cfg.usdtDecimals >= 6 ? 10n ** BigInt(cfg.usdtDecimals - 6) : 1n;
  const baseUnits = cfg.usdtDecimals >= 6 ? micro * scale : (micro + 10n ** BigInt(6 - cfg.usdtDecimals) - 1n) / 10n ** BigInt(6 - cfg.usdtDecimals);
  return {
    x402Version: 1,
    accepts: [
      {
        scheme: 'exact',
        network: cfg.network,
        maxAmountRequired: baseUnits.toString(),
        resource: opts.resource,
        description: opts.description,
        mimeType: 'application/json',
        payTo: cfg.treasury,
        asset: cfg.usdtContract,
        maxTimeoutSeconds: 600,
        extra: { name: 'USDT', decimals: cfg.usdtDecimals, settle: 'POST /v1/billing/deposits with {chain, tx_hash}' },
      },
    ],
  };
}
