import { createHmac, randomBytes } from 'node:crypto';

/** Standard Webhooks secrets: `whsec_` + base64 of the key bytes (here 32 random bytes). */
export const SECRET_PREFIX = 'whsec_';

export function newWebhookSecret(): string {
  return SECRET_PREFIX + randomBytes(32).toString('base64');
}

/** The HMAC key of a `whsec_` secret: the base64-decoded part after the prefix. */
export function secretKey(secret: string): Buffer {
  return Buffer.from(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret, 'base64');
}

/**
 * The Standard Webhooks headers of one delivery attempt: `webhook-id` (the event id, stable across
 * retries so receivers can deduplicate), `webhook-timestamp` (unix seconds of the attempt) and
 * `webhook-signature: v1,<base64 HMAC-SHA256 of "${id}.${timestamp}.${body}">`.
 */
export function signatureHeaders(secret: string, msgId: string, at: Date, body: string): Record<string, string> {
  const timestamp = Math.floor(at.getTime() / 1000);
  const mac = createHmac('sha256', secretKey(secret)).update(`${msgId}.${timestamp}.${body}`).digest('base64');
  return { 'webhook-id': msgId, 'webhook-timestamp': String(timestamp), 'webhook-signature': `v1,${mac}` };
}
