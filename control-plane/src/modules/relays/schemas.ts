import { z } from 'zod';
import { DEFAULT_EXPIRY_SECONDS, DEFAULT_MAX_ACCESSES, GRANT_SECONDS, MAX_ACCESSES, MAX_EXPIRY_SECONDS, MAX_OBJECT_BYTES, MAX_OBJECTS, MAX_TOTAL_BYTES, MIN_EXPIRY_SECONDS } from './service.ts';

export const IdParams = z.object({ id: z.string().max(64) });
export const SecretParams = z.object({ secret: z.string().max(128) });
export const ObjectParams = z.object({ secret: z.string().max(128), id: z.string().max(64) });

export const CreateBody = z
  .object({
    objects: z
      .array(
        z
          .object({
            name: z.string().max(255),
            content_type: z.string().max(255),
            content_b64: z.string().describe(`The bytes, base64; at most ${MAX_OBJECT_BYTES} bytes each.`),
          })
          .strict(),
      )
      .max(MAX_OBJECTS)
      .describe(`1 to ${MAX_OBJECTS} objects, at most ${MAX_TOTAL_BYTES} bytes in all.`),
    expires_in_seconds: z.number().int().optional().describe(`${MIN_EXPIRY_SECONDS} to ${MAX_EXPIRY_SECONDS}; default ${DEFAULT_EXPIRY_SECONDS}.`),
    max_accesses: z.number().int().optional().describe(`Opens the link allows, 1 to ${MAX_ACCESSES}; default ${DEFAULT_MAX_ACCESSES}.`),
    pin: z.string().max(12).optional().describe('4 to 12 digits, asked when the link is opened.'),
    view_only: z.boolean().optional().describe('Serve only image/* and text/*, inline, with nosniff and a restrictive CSP.'),
  })
  .strict();

const ObjectView = z.object({ id: z.string(), name: z.string(), content_type: z.string(), bytes: z.number(), sha256: z.string() });

export const RelayView = z.object({
  id: z.string(),
  status: z.enum(['active', 'revoked', 'locked', 'expired', 'exhausted']),
  view_only: z.boolean(),
  pin_protected: z.boolean(),
  expires_at: z.string(),
  max_accesses: z.number(),
  accesses: z.number(),
  failed_pin_attempts: z.number(),
  object_count: z.number(),
  total_bytes: z.number(),
  objects: z.array(ObjectView),
  content_destroyed: z.boolean(),
  created_at: z.string(),
  ended_at: z.string().nullable(),
});

export const CreatedRelay = RelayView.extend({ share_url: z.string().describe('Shown once: it carries the link secret, stored only as sha256.') });

export const OpenBody = z.object({ pin: z.string().max(64).optional() }).strict();
export const OpenedRelay = z.object({
  view_only: z.boolean(),
  expires_at: z.string(),
  accesses: z.number(),
  max_accesses: z.number(),
  grant: z.string().describe(`Fetches this access's objects for ${GRANT_SECONDS} s (never past the relay's expiry).`),
  grant_expires_at: z.string(),
  objects: z.array(ObjectView),
});
export const ObjectBody = z.object({ grant: z.string().max(128).describe('The grant an open of this link returned.') }).strict();
