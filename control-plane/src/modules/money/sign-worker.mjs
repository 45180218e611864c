// ReceiptSigner's worker thread, for the key in workerData. Three kinds of message:
// - `{ sign: string[] }`: RFC 8785 canonical receipt texts, answered `{ signed }` with, per text, its 0x
//   sha256 and its EIP-191 personal_sign signature (r || s || v, v in {27, 28}, low s). With
//   workerData.prepared, the nonce is one this thread prepared in a batch (see prepare: k·G costs about two
//   thirds of an RFC 6979 signature, and k⁻¹ comes almost free in a batch), used once; else RFC 6979's.
// - `{ exit: true }`: the thread ends (after the messages before it).
// - `{ nonces: count }`: answered `{ nonces }` with that many PreparedNonce records (see
//   shared/src/crypto/prepared-signature.d.mts): r = (k·G).x, the parity of (k·G).y, k⁻¹ and k⁻¹·r·d mod n, for a fresh
//   random k from the operating system's CSPRNG each.
// Point arithmetic is libsecp256k1's; the prepared signature is prepared-signature.mjs's, shared with the
// main thread. Plain JavaScript so that it runs under any loader; signer.test.ts
// checks that its signatures equal shared/src/crypto/eip191.ts's and that prepared nonces sign for the key.
import { createHash, randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import { performance } from 'node:perf_hooks';
import { parentPort, workerData } from 'node:worker_threads';
import { createKeccak } from 'hash-wasm';
import { N, signDigestPrepared } from '@svc/shared/prepared-signature';

const require = createRequire(import.meta.url);
const secp = require('secp256k1');
// The same WebAssembly Keccak as shared/src/crypto/keccak.ts, and like it js-sha3 when that cannot load.
const wasm = await createKeccak(256).catch(() => null);
const { keccak256 } = require('js-sha3');
const keccak = (bytes) => (wasm ? wasm.init().update(bytes).digest('binary') : new Uint8Array(keccak256.arrayBuffer(bytes)));
const key = Buffer.from(String(workerData.key).slice(2), 'hex');
const d = BigInt(workerData.key);

/** This thread's own prepared nonces (workerData.prepared), each taken once. */
let own = [];
const OWN_BATCH = 256;

function sign(canonical) {
  const body = Buffer.from(canonical, 'utf8');
  const digest = keccak(Buffer.concat([Buffer.from(`\x19Ethereum Signed Message:\n${body.length}`, 'utf8'), body]));
  const hash = `0x${createHash('sha256').update(body).digest('hex')}`;
  if (workerData.prepared) {
    if (own.length === 0) own = prepare(OWN_BATCH);
    const signature = signDigestPrepared(digest, own.pop());
    if (signature) return [hash, signature];
  }
  const { signature, recid } = secp.ecdsaSign(digest, key);
  const out = Buffer.alloc(65);
  out.set(signature, 0);
  out[64] = 27 + recid;
  return [hash, `0x${out.toString('hex')}`];
}

/** a⁻¹ mod N (extended Euclid; N is prime and 0 < a < N). */
function invert(a) {
  let [r0, r1] = [a, N];
  let [s0, s1] = [1n, 0n];
  while (r1 !== 0n) {
    const q = r0 / r1;
    [r0, r1] = [r1, r0 - q * r1];
    [s0, s1] = [s1, s0 - q * s1];
  }
  return ((s0 % N) + N) % N;
}

/**
 * `count` nonces. k⁻¹ for all of them costs one inversion (Montgomery's trick: invert the product of the
 * k's, then peel each k⁻¹ off with two multiplications) instead of one each, which cost as much as k·G.
 */
function prepare(count) {
  const ks = [];
  const points = [];
  while (ks.length < count) {
    const random = randomBytes(32 * count);
    for (let i = 0; i < count && ks.length < count; i++) {
      const kb = random.subarray(32 * i, 32 * i + 32);
      const k = BigInt(`0x${kb.toString('hex')}`);
      if (k === 0n || k >= N) continue;
      const point = secp.publicKeyCreate(kb, true); // k·G, compressed: 0x02 or 0x03 (y's parity), then x
      if (BigInt(`0x${Buffer.from(point.subarray(1)).toString('hex')}`) >= N) continue; // x >= n (about 2^-128) would need the recovery id's second bit
      ks.push(k);
      points.push(point);
    }
  }
  const prefix = new Array(count); // prefix[i] = k0·k1·…·ki mod N
  let acc = 1n;
  for (let i = 0; i < count; i++) prefix[i] = acc = (acc * ks[i]) % N;
  let inv = invert(acc); // (k0·…·k_last)⁻¹
  const out = new Array(count);
  for (let i = count - 1; i >= 0; i--) {
    const kinv = i > 0 ? (inv * prefix[i - 1]) % N : inv;
    inv = (inv * ks[i]) % N; // now (k0·…·k(i-1))⁻¹
    const rHex = Buffer.from(points[i].subarray(1)).toString('hex');
    out[i] = { r: rHex, parity: points[i][0] & 1, kinv, a: (((kinv * BigInt(`0x${rHex}`)) % N) * d) % N };
  }
  return out;
}

parentPort.on('message', (msg) => {
  if (msg.exit) {
    own = []; // forgotten with the thread
    return parentPort.close(); // ReceiptSigner.close: the thread ends once this turn is over
  }
  if (typeof msg.nonces === 'number') {
    const began = performance.timeOrigin + performance.now(); // for the stall trace: when this thread held a core for the batch
    const nonces = prepare(msg.nonces);
    return parentPort.postMessage({ nonces, took: [began, performance.timeOrigin + performance.now()] });
  }
  const signed = [];
  for (const c of msg.sign) {
    try {
      signed.push(sign(c));
    } catch (e) {
      signed.push({ error: String(e) });
    }
  }
  parentPort.postMessage({ signed });
});
