/** The live verification badge of a shared receipt: a small, self-contained SVG with every text escaped. */

export function escapeXml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}

/** Integer micro-USD as dollars, at least two decimals: 1000 -> "$0.001", 2_500_000 -> "$2.50". */
export function formatUsd(micro: number): string {
  const sign = micro < 0 ? '-' : '';
  const abs = Math.abs(micro);
  const whole = Math.floor(abs / 1_000_000);
  const frac = String(abs % 1_000_000).padStart(6, '0').replace(/0+$/, '').padEnd(2, '0');
  return `${sign}$${whole}.${frac}`;
}

const width = (s: string) => Math.ceil([...s].length * 6.6) + 12;

export interface BadgeInput {
  verified: boolean;
  kind: string;
  costMicroUsd: number | null;
}

export const VERIFIED_MARK = '✓ verified';
export const FAILED_MARK = '✗ failed';

export function renderBadge(b: BadgeInput): string {
  const chars = [...b.kind];
  const kind = chars.length > 40 ? `${chars.slice(0, 39).join('')}…` : b.kind;
  const cost = b.costMicroUsd === null ? '?' : formatUsd(b.costMicroUsd);
  const left = 'svc receipt';
  const right = `${b.verified ? VERIFIED_MARK : FAILED_MARK} · ${kind} · ${cost}`;
  const lw = width(left);
  const rw = width(right);
  const total = lw + rw;
  const color = b.verified ? '#2e7d32' : '#c62828';
  const title = `svc receipt: ${b.verified ? 'signature verified' : 'verification failed'}; kind ${kind}; cost ${cost}`;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${total}" height="20" role="img" aria-label="${escapeXml(title)}" data-verified="${b.verified}">`,
    `<title>${escapeXml(title)}</title>`,
    `<rect width="${lw}" height="20" fill="#555"/>`,
    `<rect x="${lw}" width="${rw}" height="20" fill="${color}"/>`,
    `<g fill="#fff" font-family="Verdana,DejaVu Sans,sans-serif" font-size="11">`,
    `<text x="6" y="14">${escapeXml(left)}</text>`,
    `<text x="${lw + 6}" y="14">${escapeXml(right)}</text>`,
    `</g>`,
    `</svg>`,
  ].join('');
}
