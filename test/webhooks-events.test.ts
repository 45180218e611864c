import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { WEBHOOK_EVENT_TYPES } from '../control-plane/src/modules/webhooks/events.ts';

/** The list of webhook event types in docs/webhooks.md is the code's list (control-plane/src/modules/webhooks/events.ts). */
describe('webhook event types', () => {
  it('docs/webhooks.md lists exactly the event types the code emits', () => {
    const readme = readFileSync(new URL('../docs/webhooks.md', import.meta.url), 'utf8');
    // The bullet "- Webhook event types ..." up to the next bullet, heading or blank line.
    const m = /^- Webhook event types\b[^\n]*(?:\n(?! *-|#|\n)[^\n]*)*/m.exec(readme);
    expect(m, 'docs/webhooks.md has a "- Webhook event types" bullet').not.toBeNull();
    // Event names are the backticked snake_case words (other backticked text has capitals, slashes or spaces).
    const listed = [...m![0].matchAll(/`([a-z][a-z0-9]*(?:[._][a-z0-9*]+)+)`/g)].map((x) => x[1]!);
    expect([...listed].sort()).toEqual([...WEBHOOK_EVENT_TYPES].sort());
    expect(new Set(listed).size).toBe(listed.length);
  });
});
