import jsSha3 from 'js-sha3';
import { createKeccak, type IHasher } from 'hash-wasm';

/**
 * Keccak-256 (Ethereum's, not SHA3-256's padding). Every receipt is hashed here once, so it runs on
 * hash-wasm's WebAssembly Keccak (about 4 µs for a receipt against js-sha3's 16 µs on this machine);
 * until that module has compiled, shortly after start, js-sha3 answers the same digest.
 */
let wasm: IHasher | null = null;

/** Resolves once the WebAssembly Keccak is in use (never rejects: js-sha3 stays if it cannot load). */
export const keccakReady: Promise<void> = createKeccak(256).then(
  (h) => {
    wasm = h;
  },
  () => undefined,
);

export function keccak256(data: Uint8Array): Uint8Array {
  // init, update and digest run in one synchronous stretch, so the one hasher is never shared mid-digest
  if (wasm) return wasm.init().update(data).digest('binary');
  return new Uint8Array(jsSha3.keccak256.arrayBuffer(data));
}

/** Keccak-256 of `head` (a string, hashed as its UTF-8 bytes) followed by `data`, without joining them first. */
export function keccak256Of(head: string, data: Uint8Array): Uint8Array {
  if (wasm) return wasm.init().update(head).update(data).digest('binary');
  return new Uint8Array(jsSha3.keccak256.create().update(head).update(data).arrayBuffer());
}

/** Which implementation answers now (tests check both agree). */
export function keccakBackend(): 'wasm' | 'js' {
  return wasm ? 'wasm' : 'js';
}
