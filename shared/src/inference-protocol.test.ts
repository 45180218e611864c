import { describe, expect, it } from 'vitest';
import { SseParser, frameData } from './inference-protocol.ts';

describe('SseParser', () => {
  it('frames data and event lines, across pushes and line endings, dropping comments', () => {
    const p = new SseParser();
    expect(p.push(': hi\r\ndata: {"a"')).toEqual([]);
    expect(p.push(':1}\r\n\r\nevent: receipt\ndata: x\ndata: y\n\n')).toEqual([
      { event: null, data: '{"a":1}' },
      { event: 'receipt', data: 'x\ny' },
    ]);
    expect(p.push('data: last')).toEqual([]);
    expect(p.end()).toEqual([{ event: null, data: 'last' }]);
  });

  it("takes llama.cpp's `error:` line as an error frame, which frameData turns into the inline error chunk", () => {
    const frames = new SseParser().push('error: {"code":400,"message":"too long","type":"exceed_context_size_error"}\n\ndata: [DONE]\n\n');
    expect(frames).toEqual([
      { event: 'error', data: '{"code":400,"message":"too long","type":"exceed_context_size_error"}' },
      { event: null, data: '[DONE]' },
    ]);
    expect(JSON.parse(frameData(frames[0]!))).toEqual({ error: { code: 400, message: 'too long', type: 'exceed_context_size_error' } });
    expect(frameData(frames[1]!)).toBe('[DONE]');
  });

  it('frameData: an `event: error` frame carrying {"error": ...} is not wrapped twice; text becomes a message', () => {
    expect(JSON.parse(frameData({ event: 'error', data: '{"error":{"message":"m"}}' }))).toEqual({ error: { message: 'm' } });
    expect(JSON.parse(frameData({ event: 'error', data: 'overloaded' }))).toEqual({ error: { message: 'overloaded' } });
    expect(JSON.parse(frameData({ event: 'error', data: '"busy"' }))).toEqual({ error: { message: 'busy' } });
  });
});
