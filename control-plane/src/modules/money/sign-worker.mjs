// Receipt signing off the event loop (ReceiptSigner.signLater): each message is a batch of RFC 8785
// canonical receipt texts; the answer is, per text, its 0x sha256 and its EIP-191 personal_sign signature
// (r || s || v, v in {27, 28}) by the key in workerData. Plain JavaScript so that it runs under any loader;
// a test checks that its output is byte-identical to shared/src/crypto/eip191.ts.
import { createHash } from 'node:crypto';
import { createRequire } from 'node:module';
import { parentPort, workerData } from 'node:worker_threads';

const require = createRequire(import.meta.url);
const secp = require('secp256k1');
const { keccak256 } = require('js-sha3');
const key = Buffer.from(String(workerData.key).slice(2), 'hex');

function sign(canonical) {
  const body = Buffer.from(canonical, 'utf8');
  const digest = new Uint8Array(keccak256.arrayBuffer(Buffer.concat([Buffer.from(`\x19Ethereum Signed Message:\n${body.length}`, 'utf8'), body])));
  const { signature, recid } = secp.ecdsaSign(digest, key);
  const out = Buffer.alloc(65);
  out.set(signature, 0);
  out[64] = 27 + recid;
  return [`0x${createHash('sha256').update(body).digest('hex')}`, `0x${out.toString('hex')}`];
}

parentPort.on('message', (batch) => {
  const out = [];
  for (const c of batch) {
    try {
      out.push(sign(c));
    } catch (e) {
      out.push({ error: String(e) });
    }
  }
  parentPort.postMessage(out);
});
