import { describe, expect, it } from 'vitest';
import { settleJson, type SettleItem } from './batch-calls.ts';

const item = (i: number): SettleItem => ({
  hold: `hold_${i}`, account: 'acct_1', chain: ['key_1'], cost: 13, event: `ue_${i}`, kind: 'inference', route: 'POST /v1/chat/completions',
  model: 'm', units: { input_tokens: 9, note: 'naïve "quoted" ✓' }, receipt: `req_${i}`, payload: '{"a":"b\\"c"}', hash: '0x01', signature: '0x02',
  run: null, prev: null, seq: null, lease: true, reserved: 13,
});

describe('settleJson', () => {
  it("is the item's JSON, made once, and leaves no trace in the item's own JSON", () => {
    const it1 = item(1);
    const text = settleJson(it1);
    expect(text).toBe(JSON.stringify(item(1)));
    expect(JSON.parse(text)).toEqual(item(1));
    expect(settleJson(it1)).toBe(text);
    expect(JSON.stringify(it1)).toBe(text);
    expect(Object.keys(it1)).toEqual(Object.keys(item(1)));
    // A batch of texts joined is the JSON of the array.
    const batch = [it1, item(2)];
    expect(`[${batch.map(settleJson).join(',')}]`).toBe(JSON.stringify([item(1), item(2)]));
  });
});
