/**
 * Token base units and micro-USD (USDT counts as 1 USD). Exact integer arithmetic on bigint:
 * base units to micro-USD rounds down (dust below a micro-USD is never credited), micro-USD to base
 * units rounds up (an invoice never asks for less than its micro-USD amount).
 */
export function baseToMicro(amount: bigint, decimals: number): bigint {
  if (decimals >= 6) return amount / 10n ** BigInt(decimals - 6);
  return amount * 10n ** BigInt(6 - decimals);
}

export function microToBase(micro: bigint | number, decimals: number): bigint {
  const m = BigInt(micro);
  if (decimals >= 6) return m * 10n ** BigInt(decimals - 6);
  const d = 10n ** BigInt(6 - decimals);
  return (m + d - 1n) / d;
}

export const TX_HASH = /^0x[0-9a-fA-F]{64}$/;
export const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
