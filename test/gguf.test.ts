import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readGgufFileInfo, type Token } from 'node-llama-cpp';
import { TINY_LLAMA, buildTinyLlama, byteVocab, generatable, tinyLlamaPath } from './support/gguf.ts';
import { Detokenizer, loadEngine, renderPrompt, type Engine } from './support/llama-server.ts';

/**
 * The tiny GGUF model of test/support/gguf.ts: a file node-llama-cpp's own GGUF reader parses, and that
 * llama.cpp (the prebuilt binary of node-llama-cpp) loads, tokenizes with and generates from.
 */
let e: Engine;
beforeAll(async () => {
  e = await loadEngine();
});
afterAll(async () => {
  await e?.dispose();
});

describe('the tiny GGUF model', () => {
  it('is deterministic for its parameters, small, and cached by them', () => {
    const a = buildTinyLlama();
    expect(a.subarray(0, 4).toString('ascii')).toBe('GGUF');
    expect(a.readUInt32LE(4)).toBe(3);
    expect(a.length).toBeLessThan(2_000_000);
    expect(buildTinyLlama().equals(a)).toBe(true);
    expect(buildTinyLlama({ ...TINY_LLAMA, seed: TINY_LLAMA.seed + 1 }).equals(a)).toBe(false);
    const path = tinyLlamaPath();
    expect(readFileSync(path).equals(a)).toBe(true);
    expect(tinyLlamaPath()).toBe(path);
    expect(tinyLlamaPath({ ...TINY_LLAMA, layers: 1 })).not.toBe(path);
  });

  it("node-llama-cpp's GGUF reader sees its metadata and tensors", async () => {
    const info = await readGgufFileInfo(tinyLlamaPath(), { logWarnings: false });
    expect(info.version).toBe(3);
    expect(info.metadata.general).toMatchObject({ architecture: 'llama', name: 'svc-test-tiny-llama', alignment: 32 });
    expect(info.architectureMetadata).toMatchObject({ context_length: 256, embedding_length: 64, block_count: 2, feed_forward_length: 128, attention: { head_count: 4, head_count_kv: 4 } });
    expect(info.metadata.tokenizer.ggml.tokens).toEqual(byteVocab().tokens);
    const tensors = new Map(info.tensorInfo!.map((t) => [t.name, t.dimensions.map(Number)]));
    expect(tensors.size).toBe(3 + 9 * 2);
    expect(tensors.get('token_embd.weight')).toEqual([64, 260]);
    expect(tensors.get('blk.1.ffn_down.weight')).toEqual([128, 64]);
  });

  it('llama.cpp loads it: byte-level tokens round-trip any text', () => {
    const { model } = e;
    expect(model.tokens.bos).toBe(1);
    expect(model.tokens.eos).toBe(2);
    expect(model.trainContextSize).toBe(256);
    const byte = (b: number) => 3 + b;
    // "▁" is the escaped space; everything else falls back to its UTF-8 bytes.
    expect(model.tokenize('Hi there')).toEqual([byte(0x48), byte(0x69), 259, byte(0x74), byte(0x68), byte(0x65), byte(0x72), byte(0x65)]);
    for (const s of ['Say hello, wörld ✓', 'line\nbreak\ttab', '{"json": [1, 2]}']) expect(model.detokenize(model.tokenize(s))).toBe(s);
    expect(model.tokenize('é✓')).toEqual([0xc3, 0xa9, 0xe2, 0x9c, 0x93].map(byte));
  });

  it('the streaming detokenizer holds back an incomplete character', () => {
    const d = new Detokenizer(e.model);
    const pieces = e.model.tokenize('aé✓b').map((t) => d.push(t));
    expect(pieces).toEqual(['a', '', 'é', '', '', '✓', 'b']);
    expect(d.end()).toBe('');
    expect(d.text).toBe('aé✓b');
    const cut = new Detokenizer(e.model);
    expect(cut.push((3 + 0xe2) as Token)).toBe(''); // the first byte of a 3-byte character, and nothing after it
    expect(cut.end()).toBe('\uFFFD');
  });

  it('generates: only printable tokens, never an end of sequence, the same for the same seed', async () => {
    const run = async (seed: number, n: number) => {
      await e.sequence.clearHistory();
      const prompt = [e.model.tokens.bos!, ...e.model.tokenize(renderPrompt([{ role: 'user', content: 'Say hello' }]))];
      const out: Token[] = [];
      for await (const t of e.sequence.evaluate(prompt, { temperature: 1, seed })) if (out.push(t) >= n) break;
      expect(e.sequence.nextTokenIndex).toBe(prompt.length + n - 1); // the last token sampled, not yet evaluated
      return out;
    };
    const a = await run(7, 48);
    expect(a).toHaveLength(48);
    expect(a.every((t) => generatable(t, 260))).toBe(true);
    expect(new Set(a).size).toBeGreaterThan(4);
    expect(e.model.detokenize(a)).toMatch(/^[\x20-\x7e]{48}$/);
    expect(await run(7, 48)).toEqual(a);
    expect(await run(8, 48)).not.toEqual(a);
  });
});
