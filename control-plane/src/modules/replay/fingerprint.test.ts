import { describe, expect, it } from 'vitest';
import { canonicalOutput, outputFingerprint } from './fingerprint.ts';

const answer = (content: string, extra: Record<string, unknown> = {}) => ({
  id: `chatcmpl-${Math.random()}`,
  created: Date.now(),
  model: 'm',
  usage: { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 },
  system_fingerprint: 'fp_x',
  choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
  ...extra,
});

describe('output fingerprints', () => {
  it('ignore ids, timestamps, usage and tool call ids; see the text, the finish reason and the tool calls', () => {
    expect(outputFingerprint(answer('Paris'))).toBe(outputFingerprint(answer('Paris')));
    expect(outputFingerprint(answer('Paris'))).not.toBe(outputFingerprint(answer('Paris.')));
    const cut = answer('Paris');
    (cut.choices[0] as { finish_reason: string }).finish_reason = 'length';
    expect(outputFingerprint(cut)).not.toBe(outputFingerprint(answer('Paris')));
    const tool = (id: string, args: string) => answer('', { choices: [{ index: 0, message: { role: 'assistant', content: null, tool_calls: [{ id, type: 'function', function: { name: 'f', arguments: args } }] }, finish_reason: 'tool_calls' }] });
    expect(outputFingerprint(tool('call_1', '{"a":1}'))).toBe(outputFingerprint(tool('call_2', '{"a":1}')));
    expect(outputFingerprint(tool('call_1', '{"a":1}'))).not.toBe(outputFingerprint(tool('call_1', '{"a":2}')));
  });

  it('orders choices by index', () => {
    const a = { choices: [{ index: 1, message: { content: 'b' } }, { index: 0, message: { content: 'a' } }] };
    expect(canonicalOutput(a)).toEqual({ choices: [{ finish_reason: null, index: 0, message: { content: 'a', role: 'assistant' } }, { finish_reason: null, index: 1, message: { content: 'b', role: 'assistant' } }] });
  });
});
