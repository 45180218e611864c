import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { requireSession } from '../../http/auth.ts';
import { MAX_BYTE_LEN, MAX_LABEL_CHARS, MAX_MEMBERS, ROOT_ALGORITHM } from './root.ts';
import { LIST_CAP, type SourcesService } from './service.ts';

/** Control characters (C0 and DEL) have no place in a label shown on a proof page; NUL cannot be stored. */
const CONTROL = /[\u0000-\u001f\u007f]/;
/** A high surrogate not followed by a low one, or a low one not preceded by a high one. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

const Label = z
  .string()
  .min(1, 'a label has at least one character')
  .max(MAX_LABEL_CHARS, `a label has at most ${MAX_LABEL_CHARS} characters`)
  .refine((s) => !LONE_SURROGATE.test(s), 'holds a lone UTF-16 surrogate, which has no UTF-8 form')
  .refine((s) => !CONTROL.test(s), 'holds a control character (U+0000 to U+001F or U+007F)')
  .describe('Names the source (a path, a URL, a title); unique in the set; compared and ordered by its UTF-8 bytes, as given (no Unicode normalisation).');
const Digest = z
  .string()
  .regex(/^[0-9a-fA-F]{64}$/, 'not a SHA-256 digest: 64 hex characters')
  .describe('SHA-256 of the source bytes, 64 hex characters; uppercase is accepted and stored in lowercase.');
const ByteLen = z
  .number()
  .int('not an integer')
  .min(0, 'must be 0 or more')
  .max(MAX_BYTE_LEN, `must be at most ${MAX_BYTE_LEN}`)
  .describe('Length of the source in bytes.');

const MemberIn = z.object({ label: Label, sha256: Digest, byte_len: ByteLen }).strict();
const RegisterBody = z
  .object({
    members: z
      .array(MemberIn)
      .min(1, 'a set has at least one member')
      .max(MAX_MEMBERS, `a set has at most ${MAX_MEMBERS} members`)
      .superRefine((members, ctx) => {
        const seen = new Map<string, number>();
        members.forEach((m, i) => {
          const first = seen.get(m.label);
          if (first !== undefined) ctx.addIssue({ code: 'custom', path: [i, 'label'], message: `repeats the label of members[${first}]` });
          else seen.set(m.label, i);
        });
      }),
  })
  .strict();

const MemberOut = z.object({ label: z.string(), sha256: z.string(), byte_len: z.number().int() });
const SetSummary = z.object({
  id: z.string(),
  object: z.literal('source_set'),
  root: z.string().describe('The ordered root, 64 lowercase hex (docs/sources.md).'),
  root_algorithm: z.literal(ROOT_ALGORITHM),
  member_count: z.number().int(),
  created_at: z.string(),
  public_url: z.string().describe('GET /v1/sources/public/:id, the public proof.'),
});
const SetDetail = SetSummary.extend({
  root_recomputes: z.boolean().describe('The stored members recompute to the stored root (computed on this read).'),
  members: z.array(MemberOut).describe('In root order.'),
});
const Proof = z.object({
  id: z.string(),
  object: z.literal('source_set_proof'),
  root: z.string(),
  root_algorithm: z.literal(ROOT_ALGORITHM),
  root_recomputes: z.boolean().describe('Recomputed from the stored members on every read, not stored.'),
  recomputed_root: z.string().nullable().describe('What the stored members recompute to now; null when they make no set.'),
  member_count: z.number().int(),
  members: z.array(MemberOut).describe('In root order.'),
  created_at: z.string(),
});
const SetParams = z.object({ id: z.string() });

/** Room for MAX_MEMBERS members of the longest labels written as JSON \u escapes. */
const BODY_LIMIT = 2 * 1024 * 1024;

/** Source sets (spec: proofs): register, list, read, take down; the public proof. */
export function sourcesRoutes(app: FastifyInstance, sources: SourcesService): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const tags = ['sources'];
  const config = { auth: 'session' as const };
  const me = (req: Parameters<typeof requireSession>[0]) => requireSession(req).accountId;

  r.post(
    '/v1/sources/sets',
    {
      config,
      bodyLimit: BODY_LIMIT,
      schema: {
        tags,
        summary: `Register a source set from fingerprints (1 to ${MAX_MEMBERS} members); an unrecognised field at any level is refused (400, naming it)`,
        body: RegisterBody,
        response: { 201: SetDetail },
      },
    },
    async (req, reply) => reply.code(201).send(await sources.register(me(req), req.body.members)),
  );

  r.get(
    '/v1/sources/sets',
    { config, schema: { tags, summary: `Your live sets, newest first, at most ${LIST_CAP}, without members (named-key envelope \`sets\`)`, response: { 200: z.object({ sets: z.array(SetSummary) }) } } },
    async (req) => sources.list(me(req)),
  );

  r.get(
    '/v1/sources/sets/:id',
    { config, schema: { tags, summary: "One set with its members; another account's, a taken-down and an unknown set answer the same 404", params: SetParams, response: { 200: SetDetail } } },
    async (req) => sources.get(me(req), req.params.id),
  );

  r.delete(
    '/v1/sources/sets/:id',
    {
      config,
      schema: {
        tags,
        summary: 'Take down: the members are deleted and the public proof answers 404; receipts citing its root keep citing it',
        params: SetParams,
        response: { 200: z.object({ id: z.string(), object: z.literal('source_set'), root: z.string(), deleted: z.literal(true), deleted_at: z.string() }) },
      },
    },
    async (req) => sources.takeDown(me(req), req.params.id),
  );

  r.get(
    '/v1/sources/public/:id',
    {
      config: { auth: 'public' },
      schema: { tags, summary: 'Source-set proof: members (label, sha256, byte_len), ordered root, root_recomputes; 404 once taken down', params: SetParams, response: { 200: Proof } },
    },
    async (req) => sources.publicProof(req.params.id),
  );
}
