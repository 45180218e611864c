import { randomBytes } from 'node:crypto';
import type { FastifyReply } from 'fastify';

/**
 * The one small template of the gateway's server-rendered public pages (the OAuth consent page and its error
 * page, the sealed-call and shared-receipt pages, and later the verdict pages): a complete HTML document with
 * no external assets. Values are escaped by `html`; inline style and scripts (inline, or a bundled script of
 * this origin) run only under the response's CSP nonce, the page is never framed (clickjacking), never
 * cached, and sends no Referer.
 */

/** A fragment of HTML that is safe to insert as is: made only by `html`, which escapes what it interpolates. */
export class Html {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text;
  }
}

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ESCAPES[c]!);
}

/** Tagged template: Html values and arrays of them go in as they are, anything else is escaped text. */
export function html(strings: TemplateStringsArray, ...values: unknown[]): Html {
  let out = strings[0]!;
  values.forEach((v, i) => {
    out += render(v) + strings[i + 1]!;
  });
  return new Html(out);
}

function render(v: unknown): string {
  if (v instanceof Html) return v.text;
  if (Array.isArray(v)) return v.map(render).join('');
  if (v === null || v === undefined || v === false) return '';
  return escapeHtml(String(v));
}

const STYLE = `
  body{font:16px/1.5 system-ui,-apple-system,Segoe UI,sans-serif;margin:0;background:#f5f5f4;color:#1c1917}
  main{max-width:34rem;margin:3rem auto;padding:2rem;background:#fff;border-radius:12px;box-shadow:0 1px 3px #0002}
  h1{font-size:1.35rem;margin:0 0 1rem} code{font-size:.9em;word-break:break-all}
  ul{padding-left:1.2rem} li{margin:.35rem 0} .muted{color:#57534e;font-size:.9rem}
  .actions{display:flex;gap:.75rem;margin-top:1.5rem}
  button{font:inherit;padding:.6rem 1.2rem;border-radius:8px;border:1px solid #a8a29e;background:#fff;cursor:pointer}
  button.primary{background:#1c1917;color:#fff;border-color:#1c1917} button:disabled{opacity:.5;cursor:default}
  .error{color:#b91c1c}
`;

export interface Page {
  status?: number;
  title: string;
  body: Html;
  /** Inline script (this codebase's own, never caller text); runs under the page's nonce. */
  script?: string;
  /** A script of this origin (a bundled asset), loaded under the page's nonce. */
  scriptSrc?: string;
  /** CSS of the page beside the shared style (this codebase's own). */
  style?: string;
}

export function sendPage(reply: FastifyReply, page: Page): FastifyReply {
  const nonce = randomBytes(16).toString('base64');
  const doc = html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${page.title}</title><style nonce="${nonce}">${new Html(STYLE + (page.style ?? ''))}</style></head>
<body><main>${page.body}</main>${page.script ? html`<script nonce="${nonce}">${new Html(page.script)}</script>` : ''}${page.scriptSrc ? html`<script nonce="${nonce}" src="${page.scriptSrc}" defer></script>` : ''}</body></html>
`;
  return reply
    .code(page.status ?? 200)
    .header('content-type', 'text/html; charset=utf-8')
    .header(
      'content-security-policy',
      `default-src 'none'; style-src 'nonce-${nonce}'; script-src 'nonce-${nonce}'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'`,
    )
    .header('x-frame-options', 'DENY')
    .header('x-content-type-options', 'nosniff')
    .header('referrer-policy', 'no-referrer')
    .header('cache-control', 'no-store')
    .send(doc.text);
}
