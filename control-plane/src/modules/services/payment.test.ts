import { describe, expect, it } from 'vitest';
import { PaymentRefused, checkAgainstTerms, readPayment, reasonOf, type Payment } from './payment.ts';
import { v1Network } from './x402.ts';

const auth = { from: `0x${'a'.repeat(40)}`, to: `0x${'b'.repeat(40)}`, value: '1000', validAfter: '0', validBefore: '2000', nonce: `0x${'c'.repeat(64)}` };
const v2 = { x402Version: 2, accepted: { scheme: 'exact', network: 'eip155:84532', asset: `0x${'d'.repeat(40)}`, payTo: auth.to, amount: '1000' }, payload: { authorization: auth, signature: '0x1234' } };
const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64');
const refusedWith = (f: () => unknown) => {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(PaymentRefused);
    return (e as PaymentRefused).reason;
  }
  throw new Error('not refused');
};

describe('readPayment', () => {
  it('reads version 2 from PAYMENT-SIGNATURE and version 1 from X-PAYMENT', () => {
    const p = readPayment({ 'payment-signature': b64(v2) })!;
    expect(p).toMatchObject({ version: 2, scheme: 'exact', network: 'eip155:84532', paymentId: null });
    const v1 = readPayment({ 'x-payment': b64({ x402Version: 1, scheme: 'exact', network: 'base-sepolia', payload: v2.payload }) })!;
    expect(v1).toMatchObject({ version: 1, network: 'base-sepolia', asset: null });
    expect(readPayment({})).toBeNull();
  });

  it('refuses malformed headers, the wrong version, and a malformed payment identifier', () => {
    expect(refusedWith(() => readPayment({ 'x-payment': '%%%' }))).toBe('malformed_payment');
    expect(refusedWith(() => readPayment({ 'x-payment': b64(v2) }))).toBe('version_mismatch');
    expect(refusedWith(() => readPayment({ 'payment-signature': b64({ ...v2, payload: { signature: '0x' } }) }))).toBe('malformed_payment');
    expect(refusedWith(() => readPayment({ 'payment-signature': b64({ ...v2, extensions: { 'payment-identifier': { info: { id: 'short' } } } }) }))).toBe('malformed_payment');
    expect(readPayment({ 'payment-signature': b64({ ...v2, extensions: { 'payment-identifier': { info: { id: 'pay_0123456789abcdef' } } } }) })!.paymentId).toBe('pay_0123456789abcdef');
  });

  it('fingerprints the payload canonically (key order does not matter)', () => {
    const a = readPayment({ 'payment-signature': b64(v2) })!;
    const reordered = { payload: v2.payload, accepted: v2.accepted, x402Version: 2 };
    expect(readPayment({ 'payment-signature': b64(reordered) })!.sha256).toBe(a.sha256);
  });
});

describe('checkAgainstTerms', () => {
  const p = readPayment({ 'payment-signature': b64(v2) })! as Payment;
  const terms = { network: 'eip155:84532', asset: v2.accepted.asset, payee: auth.to, amount: 1000n, nowSeconds: 1000 };
  it('passes a payment that matches', () => expect(() => checkAgainstTerms(p, terms)).not.toThrow());
  it('names each mismatch', () => {
    expect(refusedWith(() => checkAgainstTerms(p, { ...terms, network: 'eip155:1' }))).toBe('wrong_network');
    expect(refusedWith(() => checkAgainstTerms(p, { ...terms, asset: `0x${'e'.repeat(40)}` }))).toBe('wrong_asset');
    expect(refusedWith(() => checkAgainstTerms(p, { ...terms, payee: `0x${'e'.repeat(40)}` }))).toBe('wrong_payee');
    expect(refusedWith(() => checkAgainstTerms(p, { ...terms, amount: 1001n }))).toBe('underpaid');
    expect(refusedWith(() => checkAgainstTerms(p, { ...terms, amount: 999n }))).toBe('amount_mismatch');
    expect(refusedWith(() => checkAgainstTerms(p, { ...terms, nowSeconds: 1995 }))).toBe('expired');
    expect(refusedWith(() => checkAgainstTerms({ ...p, authorization: { ...auth, validAfter: '1500' } }, terms))).toBe('not_yet_valid');
    expect(refusedWith(() => checkAgainstTerms({ ...p, scheme: 'upto' }, terms))).toBe('unsupported_scheme');
  });
});

describe('names', () => {
  it('maps library reasons and chain names', () => {
    expect(reasonOf('invalid_exact_evm_payload_signature')).toBe('invalid_signature');
    expect(reasonOf('invalid_exact_evm_transaction_simulation_failed', 'execution reverted: authorization is used or canceled')).toBe('payment_reused');
    expect(v1Network(84532)).toBe('base-sepolia');
    expect(v1Network(31337)).toBe('eip155:31337');
  });
});
