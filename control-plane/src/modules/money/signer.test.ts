import { describe, expect, it } from 'vitest';
import { recoverMessageAddress } from 'viem';
import { generatePrivateKey, type ReceiptPayload } from '@svc/shared';
import { ReceiptSigner } from './signer.ts';

const payload = (i: number): Omit<ReceiptPayload, 'signer'> => ({
  v: 1,
  id: `req_${i}`,
  kind: 'inference',
  account_id: 'acct_1',
  key_id: 'key_1',
  usage_event_id: `ue_${i}`,
  route: 'POST /v1/chat/completions',
  model: 'm',
  units: { input_tokens: 9 + i, output_tokens: 2, note: 'naïve ✓ 😀' },
  cost_micro_usd: 13 + i,
  created_at: '2026-11-23T00:00:00.000Z',
  run: null,
  policy: null,
});

describe('ReceiptSigner.signLater (worker thread)', () => {
  it('signs the same bytes as inline signing, many in one turn, and any Ethereum library recovers the signer', async () => {
    const signer = new ReceiptSigner(generatePrivateKey());
    try {
      const later = await Promise.all(Array.from({ length: 40 }, (_, i) => signer.signLater(payload(i))));
      for (let i = 0; i < later.length; i++) {
        expect(later[i]).toEqual(signer.signReceipt(payload(i))); // RFC 6979: deterministic, so byte-identical
      }
      expect(signer.signedOffThread).toBe(40);
      expect(await recoverMessageAddress({ message: later[7]!.canonical, signature: later[7]!.signature })).toBe(signer.address);
    } finally {
      await signer.close();
    }
  });

  it('signs inline once the worker is gone, including what was on its way', async () => {
    const signer = new ReceiptSigner(generatePrivateKey());
    const first = signer.signLater(payload(1));
    const closing = signer.close(); // the worker goes while the first receipt is gathered
    const after = signer.signLater(payload(2));
    await closing;
    expect(await first).toEqual(signer.signReceipt(payload(1)));
    expect(await after).toEqual(signer.signReceipt(payload(2)));
    expect(signer.signedOffThread).toBe(0);
  });
});
