import { isIP } from 'node:net';
import { z } from 'zod';

/**
 * Passkeys (WebAuthn sign-in): SVC_PASSKEY_RP_ID is the relying party id (a domain, e.g. `example.com`, or
 * `localhost`), SVC_PASSKEY_ORIGIN the origin of the page that runs the ceremony (e.g. `https://example.com`;
 * several comma-separated where one gateway serves more than one site of that domain). Both set: the
 * `/v1/auth/passkey*` routes are mounted; neither: they answer 404; one without the other stops boot.
 */
export interface PasskeyConfig {
  rpId: string;
  /** Each a bare origin (`scheme://host[:port]`, no trailing slash), as browsers write it in clientDataJSON. */
  origins: string[];
  /** Shown by the browser and the authenticator beside the account name. */
  rpName: string;
}

const LABEL = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/;

/** A relying party id: a lowercase DNS name (no scheme, port, path or IP address). */
export function rpIdProblem(rpId: string): string | null {
  if (rpId !== rpId.toLowerCase()) return 'must be lowercase';
  if (isIP(rpId)) return 'must be a domain name, not an IP address (browsers refuse IP addresses as relying party ids)';
  if (rpId.length > 253 || !rpId.split('.').every((l) => LABEL.test(l))) return 'must be a domain name such as example.com or localhost (no scheme, port or path)';
  return null;
}

/** Whether browsers run WebAuthn on `host` over plain http (a secure context): localhost and its subdomains only. */
const localHost = (host: string) => host === 'localhost' || host.endsWith('.localhost');

/** One origin of SVC_PASSKEY_ORIGIN, normalised, or why it is refused. */
export function parseOrigin(raw: string, rpId: string): { origin: string } | { problem: string } {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    return { problem: `${raw}: not a URL (expected an origin such as https://example.com)` };
  }
  if (u.protocol !== 'https:' && u.protocol !== 'http:') return { problem: `${raw}: must be an https origin` };
  if (u.protocol === 'http:' && !localHost(u.hostname)) return { problem: `${raw}: must be https (plain http is allowed for localhost only)` };
  if (u.username || u.password || (u.pathname !== '/' && u.pathname !== '') || u.search || u.hash) {
    return { problem: `${raw}: must be a bare origin (scheme, host and port; no path, query or credentials)` };
  }
  if (u.hostname !== rpId && !u.hostname.endsWith(`.${rpId}`)) {
    return { problem: `${raw}: its host must be SVC_PASSKEY_RP_ID (${rpId}) or a subdomain of it` };
  }
  return { origin: u.origin };
}

export const passkeysEnv = {
  SVC_PASSKEY_RP_ID: z.string().trim().optional(),
  SVC_PASSKEY_ORIGIN: z.string().trim().optional(),
};

/**
 * The passkey settings, or null when unconfigured; problems are returned as `VARIABLE: message` lines
 * (the shape of every other config error).
 */
export function passkeysConfig(e: { SVC_PASSKEY_RP_ID?: string | undefined; SVC_PASSKEY_ORIGIN?: string | undefined }): { config: PasskeyConfig | null; problems: string[] } {
  const rpId = e.SVC_PASSKEY_RP_ID || undefined;
  const originList = e.SVC_PASSKEY_ORIGIN || undefined;
  if (!rpId && !originList) return { config: null, problems: [] };
  if (!rpId) return { config: null, problems: ['SVC_PASSKEY_RP_ID: must be set with SVC_PASSKEY_ORIGIN (both enable passkeys)'] };
  if (!originList) return { config: null, problems: ['SVC_PASSKEY_ORIGIN: must be set with SVC_PASSKEY_RP_ID (both enable passkeys)'] };
  const bad = rpIdProblem(rpId);
  if (bad) return { config: null, problems: [`SVC_PASSKEY_RP_ID: ${bad}`] };
  const problems: string[] = [];
  const origins: string[] = [];
  for (const raw of originList.split(',').map((s) => s.trim()).filter(Boolean)) {
    const r = parseOrigin(raw, rpId);
    if ('problem' in r) problems.push(`SVC_PASSKEY_ORIGIN: ${r.problem}`);
    else if (!origins.includes(r.origin)) origins.push(r.origin);
  }
  if (problems.length) return { config: null, problems };
  return { config: { rpId, origins, rpName: 'svc gateway' }, problems: [] };
}
