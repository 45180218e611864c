import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * A GGUF v3 writer and a tiny llama-architecture model made with it: random weights from a seeded PRNG
 * (so the same parameters give the same bytes), F32 tensors, and a byte-level SentencePiece ("llama")
 * vocabulary: <unk>, <s>, </s>, the 256 byte tokens <0x00>..<0xFF> (token type 6, byte) and "▁" (the
 * escaped space). Any text tokenizes (every character falls back to its UTF-8 bytes), and generation is
 * real llama.cpp inference: gibberish, since the weights are random.
 *
 * Two shaping choices keep a random model usable in tests without touching the engine:
 * - dimension 0 of every token embedding is a large constant, so the final normalized hidden state always
 *   has a large positive component there;
 * - in output.weight, that dimension is strongly negative for the special tokens and for bytes outside
 *   printable ASCII, and zero for the rest. Those tokens can never be the most likely: generation never
 *   stops by itself (max_tokens decides) and its text is printable ASCII.
 */
export interface TinyLlamaParams {
  seed: number;
  layers: number;
  embedding: number;
  heads: number;
  headsKv: number;
  feedForward: number;
  context: number;
}

export const TINY_LLAMA: TinyLlamaParams = { seed: 20261122, layers: 2, embedding: 64, heads: 4, headsKv: 4, feedForward: 128, context: 256 };

/** Bumped whenever the bytes written for the same parameters change, so cached files are not reused. */
const FORMAT = 1;

// GGUF value types.
const T = { u8: 0, i8: 1, u16: 2, i16: 3, u32: 4, i32: 5, f32: 6, bool: 7, string: 8, array: 9, u64: 10, i64: 11, f64: 12 } as const;
const GGML_F32 = 0;
const ALIGNMENT = 32;

export type GgufValue =
  | { type: 'u32'; value: number }
  | { type: 'i32'; value: number }
  | { type: 'f32'; value: number }
  | { type: 'bool'; value: boolean }
  | { type: 'string'; value: string }
  | { type: 'array'; of: 'string'; value: string[] }
  | { type: 'array'; of: 'f32' | 'i32' | 'u32'; value: ArrayLike<number> };

export interface GgufTensor {
  name: string;
  /** ggml order: dims[0] is the contiguous one (a weight matrix is [n_in, n_out]). */
  dims: number[];
  data: Float32Array;
}

/** Little-endian byte sink. */
class Sink {
  private parts: Buffer[] = [];
  length = 0;
  private push(b: Buffer) {
    this.parts.push(b);
    this.length += b.length;
  }
  u32(v: number) {
    const b = Buffer.alloc(4);
    b.writeUInt32LE(v);
    this.push(b);
  }
  i32(v: number) {
    const b = Buffer.alloc(4);
    b.writeInt32LE(v);
    this.push(b);
  }
  u64(v: number) {
    const b = Buffer.alloc(8);
    b.writeBigUInt64LE(BigInt(v));
    this.push(b);
  }
  f32(v: number) {
    const b = Buffer.alloc(4);
    b.writeFloatLE(v);
    this.push(b);
  }
  bool(v: boolean) {
    this.push(Buffer.from([v ? 1 : 0]));
  }
  string(s: string) {
    const b = Buffer.from(s, 'utf8');
    this.u64(b.length);
    this.push(b);
  }
  bytes(b: Buffer) {
    this.push(b);
  }
  pad(alignment: number) {
    const n = (alignment - (this.length % alignment)) % alignment;
    if (n) this.push(Buffer.alloc(n));
  }
  buffer() {
    return Buffer.concat(this.parts, this.length);
  }
}

function writeValue(s: Sink, v: GgufValue) {
  switch (v.type) {
    case 'u32':
      s.u32(T.u32);
      return s.u32(v.value);
    case 'i32':
      s.u32(T.i32);
      return s.i32(v.value);
    case 'f32':
      s.u32(T.f32);
      return s.f32(v.value);
    case 'bool':
      s.u32(T.bool);
      return s.bool(v.value);
    case 'string':
      s.u32(T.string);
      return s.string(v.value);
    case 'array': {
      s.u32(T.array);
      s.u32(T[v.of]);
      s.u64(v.value.length);
      if (v.of === 'string') for (const x of v.value as string[]) s.string(x);
      else for (let i = 0; i < v.value.length; i++) s[v.of](v.value[i] as number);
      return;
    }
  }
}

/** A GGUF v3 file: header, metadata, tensor infos, then the tensor data, each tensor aligned to 32 bytes. */
export function writeGguf(metadata: Record<string, GgufValue>, tensors: GgufTensor[]): Buffer {
  const s = new Sink();
  s.bytes(Buffer.from('GGUF', 'ascii'));
  s.u32(3);
  s.u64(tensors.length);
  const kv = { 'general.alignment': { type: 'u32', value: ALIGNMENT } as GgufValue, ...metadata };
  s.u64(Object.keys(kv).length);
  for (const [key, value] of Object.entries(kv)) {
    s.string(key);
    writeValue(s, value);
  }
  let offset = 0;
  for (const t of tensors) {
    if (t.data.length !== t.dims.reduce((a, b) => a * b, 1)) throw new Error(`tensor ${t.name}: ${t.data.length} values for dims ${t.dims.join('x')}`);
    s.string(t.name);
    s.u32(t.dims.length);
    for (const d of t.dims) s.u64(d);
    s.u32(GGML_F32);
    s.u64(offset);
    offset += Math.ceil(t.data.byteLength / ALIGNMENT) * ALIGNMENT;
  }
  s.pad(ALIGNMENT);
  for (const t of tensors) {
    s.bytes(Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength));
    s.pad(ALIGNMENT);
  }
  return s.buffer();
}

/** mulberry32: a small seeded PRNG, uniform in [0, 1). */
function prng(seed: number) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export const TOKEN_TYPE = { normal: 1, unknown: 2, control: 3, byte: 6 } as const;
export const SPECIAL = { unk: 0, bos: 1, eos: 2 } as const;
const BYTE0 = 3;

/** The byte-level vocabulary: token id of byte b is 3 + b; "▁" (escaped space) is the last token. */
export function byteVocab() {
  const tokens = ['<unk>', '<s>', '</s>'];
  const types: number[] = [TOKEN_TYPE.unknown, TOKEN_TYPE.control, TOKEN_TYPE.control];
  for (let b = 0; b < 256; b++) {
    tokens.push(`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`);
    types.push(TOKEN_TYPE.byte);
  }
  tokens.push('\u2581');
  types.push(TOKEN_TYPE.normal);
  return { tokens, types, scores: tokens.map(() => 0) };
}

/** True for the tokens the model may generate: printable ASCII bytes and "▁". */
export function generatable(id: number, vocabSize: number): boolean {
  if (id === vocabSize - 1) return true;
  const b = id - BYTE0;
  return b >= 0x20 && b <= 0x7e;
}

/** The tiny model as GGUF bytes (about 0.6 MB with the defaults). */
export function buildTinyLlama(p: TinyLlamaParams = TINY_LLAMA): Buffer {
  if (p.embedding % p.heads || p.heads % p.headsKv) throw new Error('embedding must divide by heads, heads by headsKv');
  const rnd = prng(p.seed);
  const uniform = (n: number, scale: number) => {
    const a = new Float32Array(n);
    for (let i = 0; i < n; i++) a[i] = (rnd() * 2 - 1) * scale;
    return a;
  };
  const ones = (n: number) => new Float32Array(n).fill(1);
  const vocab = byteVocab();
  const V = vocab.tokens.length;
  const E = p.embedding;
  const headDim = E / p.heads;
  const kvDim = headDim * p.headsKv;
  // A weight matrix [n_in, n_out] with entries of scale 1/(2 sqrt(n_in)): the residual stream stays of the
  // order of the embeddings.
  const matrix = (nIn: number, nOut: number) => uniform(nIn * nOut, 0.5 / Math.sqrt(nIn));

  const embd = uniform(E * V, 1);
  for (let t = 0; t < V; t++) embd[t * E] = 8;
  const output = uniform(E * V, 1);
  for (let t = 0; t < V; t++) output[t * E] = generatable(t, V) ? 0 : -4;

  const tensors: GgufTensor[] = [{ name: 'token_embd.weight', dims: [E, V], data: embd }];
  for (let l = 0; l < p.layers; l++) {
    const b = `blk.${l}`;
    tensors.push(
      { name: `${b}.attn_norm.weight`, dims: [E], data: ones(E) },
      { name: `${b}.attn_q.weight`, dims: [E, E], data: matrix(E, E) },
      { name: `${b}.attn_k.weight`, dims: [E, kvDim], data: matrix(E, kvDim) },
      { name: `${b}.attn_v.weight`, dims: [E, kvDim], data: matrix(E, kvDim) },
      { name: `${b}.attn_output.weight`, dims: [E, E], data: matrix(E, E) },
      { name: `${b}.ffn_norm.weight`, dims: [E], data: ones(E) },
      { name: `${b}.ffn_gate.weight`, dims: [E, p.feedForward], data: matrix(E, p.feedForward) },
      { name: `${b}.ffn_up.weight`, dims: [E, p.feedForward], data: matrix(E, p.feedForward) },
      { name: `${b}.ffn_down.weight`, dims: [p.feedForward, E], data: matrix(p.feedForward, E) },
    );
  }
  tensors.push({ name: 'output_norm.weight', dims: [E], data: ones(E) }, { name: 'output.weight', dims: [E, V], data: output });

  const u32 = (value: number): GgufValue => ({ type: 'u32', value });
  return writeGguf(
    {
      'general.architecture': { type: 'string', value: 'llama' },
      'general.name': { type: 'string', value: 'svc-test-tiny-llama' },
      'general.file_type': u32(0), // all F32
      'llama.context_length': u32(p.context),
      'llama.embedding_length': u32(E),
      'llama.block_count': u32(p.layers),
      'llama.feed_forward_length': u32(p.feedForward),
      'llama.attention.head_count': u32(p.heads),
      'llama.attention.head_count_kv': u32(p.headsKv),
      'llama.attention.layer_norm_rms_epsilon': { type: 'f32', value: 1e-5 },
      'llama.rope.dimension_count': u32(headDim),
      'llama.rope.freq_base': { type: 'f32', value: 10000 },
      'llama.vocab_size': u32(V),
      'tokenizer.ggml.model': { type: 'string', value: 'llama' },
      'tokenizer.ggml.tokens': { type: 'array', of: 'string', value: vocab.tokens },
      'tokenizer.ggml.scores': { type: 'array', of: 'f32', value: vocab.scores },
      'tokenizer.ggml.token_type': { type: 'array', of: 'i32', value: vocab.types },
      'tokenizer.ggml.unknown_token_id': u32(SPECIAL.unk),
      'tokenizer.ggml.bos_token_id': u32(SPECIAL.bos),
      'tokenizer.ggml.eos_token_id': u32(SPECIAL.eos),
      'tokenizer.ggml.add_bos_token': { type: 'bool', value: true },
      'tokenizer.ggml.add_eos_token': { type: 'bool', value: false },
      'tokenizer.ggml.add_space_prefix': { type: 'bool', value: false },
    },
    tensors,
  );
}

/**
 * The tiny model's file, generated once and cached under the OS temp dir, keyed by a hash of its
 * parameters (written to a temporary name and renamed, so concurrent test files never see half a file).
 */
export function tinyLlamaPath(p: TinyLlamaParams = TINY_LLAMA): string {
  const key = createHash('sha256').update(JSON.stringify({ FORMAT, ...p })).digest('hex').slice(0, 16);
  const dir = join(tmpdir(), 'svc-test-models');
  const path = join(dir, `tiny-llama-${key}.gguf`);
  if (existsSync(path)) return path;
  mkdirSync(dir, { recursive: true });
  const partial = `${path}.${process.pid}.partial`;
  writeFileSync(partial, buildTinyLlama(p));
  renameSync(partial, path);
  return path;
}
