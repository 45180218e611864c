import { describe, expect, it } from 'vitest';
import { Html, escapeHtml, html } from './pages.ts';

describe('page template', () => {
  it('escapes interpolated text, keeps Html fragments and joins arrays', () => {
    const name = '<script>alert("x")</script> & \'co\'';
    expect(escapeHtml(name)).toBe('&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;co&#39;');
    const items = ['a<b', 'c'].map((s) => html`<li>${s}</li>`);
    expect(html`<p title="${name}">${name}</p><ul>${items}</ul>${new Html('<br>')}${null}${undefined}`.text).toBe(
      `<p title="${escapeHtml(name)}">${escapeHtml(name)}</p><ul><li>a&lt;b</li><li>c</li></ul><br>`,
    );
  });
});
