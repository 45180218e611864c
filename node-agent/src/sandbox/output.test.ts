import { describe, expect, it } from 'vitest';
import { Demuxer, ExitMarker, OutputSink } from './output.ts';
import { runnerLine, shQuote } from './runner.ts';

// Pure unit tests (no Docker): output framing, caps and the runner's marker.
describe('sandbox output plumbing', () => {
  it('demuxes Docker frames across any chunk boundary', () => {
    const mk = (t: number, s: string) => {
      const header = Buffer.from([t, 0, 0, 0, 0, 0, 0, 0]);
      header.writeUInt32BE(Buffer.byteLength(s), 4);
      return Buffer.concat([header, Buffer.from(s)]);
    };
    const all = Buffer.concat([mk(1, 'out1'), mk(2, 'err'), mk(1, 'out2')]);
    for (let cut = 0; cut <= all.length; cut++) {
      const got: string[] = [];
      const d = new Demuxer((s, b) => got.push(`${s}:${b.toString()}`));
      d.push(all.subarray(0, cut));
      d.push(all.subarray(cut));
      expect(got).toEqual(['stdout:out1', 'stderr:err', 'stdout:out2']);
    }
  });

  it('caps a stream in bytes without splitting UTF-8 characters it forwards', () => {
    let text = '';
    const s = new OutputSink('stdout', 5, (_, t) => (text += t));
    s.write(Buffer.from('ab'));
    s.write(Buffer.from('€€')); // 6 bytes, 3 fit
    s.end();
    expect(s.bytes).toBe(5);
    expect(s.truncated).toBe(true);
    expect(text.startsWith('ab€')).toBe(true);
  });

  it('finds the exit marker split across chunks and forwards only what came before', () => {
    const marker = '\x1esvc-exit:abc:';
    const data = Buffer.from(`hello \x1e world${marker}42\ntrailing`);
    for (let cut = 0; cut <= data.length; cut++) {
      let fwd = '';
      const m = new ExitMarker(marker, (b) => (fwd += b.toString()));
      const done = m.push(data.subarray(0, cut)) || m.push(data.subarray(cut));
      expect(done).toBe(true);
      expect(m.exitCode).toBe(42);
      expect(fwd).toBe('hello \x1e world');
    }
  });

  it('quotes runner words so the shell sees them verbatim', () => {
    expect(shQuote("it's")).toBe(`'it'\\''s'`);
    expect(shQuote('a\nb')).toBe(`'a'"$N"'b'`);
    expect(runnerLine(['echo', 'x'], ['A=1'], 'n0nce').split('\n')).toHaveLength(2);
    expect(() => shQuote('a\0b')).toThrow();
  });
});
