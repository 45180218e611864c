import { x402Client, x402HTTPClient } from '@x402/core/client';
import { decodePaymentRequiredHeader, encodePaymentSignatureHeader } from '@x402/core/http';
import { registerExactEvmScheme } from '@x402/evm/exact/client';
import { wrapFetchWithPayment } from '@x402/fetch';
import type { PrivateKeyAccount } from 'viem/accounts';

/**
 * A marketplace buyer made of the stock x402 client packages: @x402/fetch's wrapper over an x402Client with
 * the EVM exact scheme (versions 1 and 2) for the buyer's key. Spend controls are off because the test token
 * is not one of the library's known assets. `sent` keeps the payment headers the wrapper sent, so a test can
 * replay one.
 */
export function x402Buyer(account: PrivateKeyAccount) {
  const client = new x402Client();
  registerExactEvmScheme(client, { signer: account });
  client.setSpendControls(false);
  const sent: Array<Record<string, string>> = [];
  const recording: typeof fetch = async (input, init) => {
    const req = new Request(input as Request, init);
    const pay: Record<string, string> = {};
    for (const h of ['payment-signature', 'x-payment']) {
      const v = req.headers.get(h);
      if (v) pay[h] = v;
    }
    if (Object.keys(pay).length) sent.push(pay);
    return fetch(req);
  };
  return {
    client,
    http: new x402HTTPClient(client),
    sent,
    fetch: wrapFetchWithPayment(recording, client),
    /** A version 2 payload for the terms of a 402's PAYMENT-REQUIRED header, with `change` applied to the requirements first. */
    async payloadV2(paymentRequiredHeader: string, change: (r: Record<string, any>) => void = () => undefined, extensions?: Record<string, unknown>) {
      const pr = decodePaymentRequiredHeader(paymentRequiredHeader) as any;
      change(pr.accepts[0]);
      const p = (await client.createPaymentPayload(pr)) as any;
      return encodePaymentSignatureHeader(extensions ? { ...p, extensions } : p);
    },
    /** A version 1 payload for a 402 body (x402Version 1, accepts). */
    async payloadV1(body: any, change: (r: Record<string, any>) => void = () => undefined) {
      const pr = JSON.parse(JSON.stringify(body));
      change(pr.accepts[0]);
      return encodePaymentSignatureHeader((await client.createPaymentPayload(pr)) as any);
    },
  };
}
