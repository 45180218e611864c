import { z } from 'zod';
import { DEFAULT_NAMESPACE, STATE_KEY_MAX_BYTES, STATE_LIST_CAP, STATE_VALUE_MAX_BYTES, keyProblem, namespaceProblem } from './names.ts';

const Namespace = z
  .string()
  .max(200)
  .superRefine((v, ctx) => {
    const p = namespaceProblem(v);
    if (p) ctx.addIssue({ code: 'custom', message: p });
  })
  .describe(`1 to 64 characters of A-Z, a-z, 0-9, ".", "_" and "-"; default "${DEFAULT_NAMESPACE}".`);

export const KeyParams = z.object({
  key: z
    .string()
    .superRefine((v, ctx) => {
      const p = keyProblem(v);
      if (p) ctx.addIssue({ code: 'custom', message: p });
    })
    .describe(`The key, percent-encoded as one path segment: 1 to ${STATE_KEY_MAX_BYTES} bytes of UTF-8; no "/", no control characters, not "." or "..". Case-sensitive, compared byte for byte.`),
});

export const NamespaceQuery = z.strictObject({ namespace: Namespace.optional() });

export const PutBody = z.strictObject({
  value: z
    .custom<unknown>((v) => v !== undefined, { message: 'required: the JSON value to store (null, false, 0, "", [] and {} are values too)' })
    .describe(`Any JSON value, at most ${STATE_VALUE_MAX_BYTES} bytes as RFC 8785 canonical JSON. Sealed at rest; read back in canonical form (object members sorted).`),
  namespace: Namespace.optional(),
});

export const WriteHeaders = z.object({
  'if-match': z.string().max(200).optional().describe('Write only if the current version is this one ("3" as the ETag gives it, or 3), or * for any existing value; otherwise 412.'),
  'if-none-match': z.string().max(200).optional().describe('*: create only; 412 when the key exists.'),
});

export const DeleteHeaders = WriteHeaders.pick({ 'if-match': true });

const Meta = {
  object: z.literal('state_value'),
  key: z.string(),
  namespace: z.string(),
  version: z.number().int().describe('Increments with every write of the key; also the ETag ("<version>"). A key created anew starts above every version the account deleted.'),
  size: z.number().int().describe("Bytes of the value's canonical JSON."),
  created_at: z.string(),
  updated_at: z.string(),
};

export const WrittenView = z.object({ ...Meta, created: z.boolean().describe('true: the key was absent (201); false: its value was replaced (200).') });

export const ValueView = z.object({ ...Meta, value: z.unknown().describe('The stored JSON value.') });

export const KeyList = z.object({
  keys: z
    .array(z.object({ key: z.string(), version: z.number().int(), size: z.number().int(), updated_at: z.string() }))
    .describe(`The namespace's keys in byte order of their UTF-8 (code point order), without values; the first ${STATE_LIST_CAP}.`),
  namespace: z.string(),
  count: z.number().int().describe('Keys the namespace holds in all.'),
  truncated: z.boolean().describe(`true when the namespace holds more than ${STATE_LIST_CAP} keys: the list stops at the first ${STATE_LIST_CAP}.`),
  cap: z.literal(STATE_LIST_CAP),
});

export const DeletedView = z.object({
  object: z.literal('state_value'),
  key: z.string(),
  namespace: z.string(),
  version: z.number().int().describe('The version deleted.'),
  deleted: z.literal(true),
});
