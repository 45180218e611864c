import { z } from 'zod';
import { AssetView } from './schemas-assets.ts';
import { HoldersView } from './schemas-positions.ts';
import { MAX_DOCUMENT_BYTES } from './documents.ts';
import { MAX_VIEW_TTL_SECONDS, VIEW_SCOPES } from './grants.ts';

export const DocumentBody = z.strictObject({
  name: z.string().trim().min(1).max(200).describe('Sealed.'),
  content_type: z
    .string()
    .regex(/^[A-Za-z0-9!#$&^_.+-]+\/[A-Za-z0-9!#$&^_.+-]+$/, 'must be a media type such as application/pdf')
    .max(100)
    .default('application/octet-stream'),
  content_b64: z.string().describe(`The document's bytes, base64 (padded); at most ${MAX_DOCUMENT_BYTES} bytes decoded (413 above). Sealed; its sha256 is chained.`),
  shared_with_holders: z.boolean().default(false).describe('Holders list and fetch it too.'),
});

export const DocumentMeta = z.object({
  id: z.string(),
  object: z.literal('vault_document'),
  asset_id: z.string(),
  name: z.string(),
  content_type: z.string(),
  size_bytes: z.number().int(),
  sha256: z.string().describe('0x sha256 of the bytes; stays after deletion.'),
  shared_with_holders: z.boolean(),
  state: z.enum(['stored', 'deleted']),
  chain_seq: z.number().int().describe('The `document_added` event.'),
  created_at: z.string(),
  deleted_at: z.string().nullable(),
});
export const DocumentContent = DocumentMeta.extend({ content_b64: z.string() });
export const DocumentList = z.object({ documents: z.array(DocumentMeta).describe('Newest first; complete.'), asset_id: z.string() });
export const DocParams = z.object({ id: z.string().min(1).max(64), doc_id: z.string().min(1).max(64) });

export const GrantBody = z.strictObject({
  scopes: z.array(z.enum(VIEW_SCOPES)).min(1).max(VIEW_SCOPES.length).describe('summary: the asset\'s fields and state; holders: the cap table; documents: every stored document.'),
  ttl_seconds: z.number().int().min(60).max(MAX_VIEW_TTL_SECONDS).optional().describe('Seconds until the key stops working; default 7 days.'),
  label: z.string().max(200).optional().describe('Who it is for; sealed.'),
});
export const GrantView = z.object({
  id: z.string(),
  object: z.literal('vault_view_grant'),
  asset_id: z.string(),
  scopes: z.array(z.enum(VIEW_SCOPES)),
  label: z.string().nullable(),
  state: z.enum(['active', 'expired', 'revoked']),
  expires_at: z.string(),
  created_at: z.string(),
  revoked_at: z.string().nullable(),
});
export const NewGrant = GrantView.extend({ token: z.string().describe('The view key, shown this once (stored as sha256).'), view_url: z.string() });
export const GrantList = z.object({ grants: z.array(GrantView).describe('Newest first; complete.') });

export const ViewTokenParams = z.object({ token: z.string().min(1).max(200) });
export const ViewDocParams = ViewTokenParams.extend({ doc_id: z.string().min(1).max(64) });
export const VaultView = z.object({
  object: z.literal('vault_view'),
  asset_id: z.string(),
  scopes: z.array(z.enum(VIEW_SCOPES)),
  expires_at: z.string(),
  summary: AssetView.omit({ roles: true, chain_url: true, anchors_url: true }).optional(),
  holders: HoldersView.optional(),
  documents: z.array(DocumentMeta).optional(),
});
