import type { Insertable } from 'kysely';
import { invalid, newId, sha256Hex, type Sealer } from '@svc/shared';
import type { LegacyObjectsTable } from '../../db/schema.ts';
import { FILE_MAX_BYTES, FILES_TOTAL_MAX_BYTES } from './limits.ts';

export interface ContentIn {
  note: string;
  files?: Array<{ name: string; content_type?: string | undefined; content_b64: string }> | undefined;
}

export interface SealedContent {
  note: Buffer;
  noteBytes: number;
  objects: Insertable<LegacyObjectsTable>[];
}

/** Associated data binding a sealed note to its plan and content version. */
export const noteAad = (planId: string, version: number) => `${planId}:note:${version}`;
/** Associated data binding a sealed object to its plan and id. */
export const objectAad = (planId: string, objectId: string) => `${planId}:object:${objectId}`;

/**
 * Decodes and checks the files (sizes per file and in all, named by field), then seals the note and each
 * file under the plan's ids. Nothing is written here: a refusal leaves no trace.
 */
export function sealContent(sealer: Sealer, planId: string, version: number, c: ContentIn, at: Date): SealedContent {
  const files = c.files ?? [];
  let total = 0;
  const decoded = files.map((f, i) => {
    const bytes = Buffer.from(f.content_b64, 'base64');
    if (bytes.length > FILE_MAX_BYTES) throw invalid(`body.files[${i}].content_b64: ${bytes.length} bytes decoded; a file holds at most ${FILE_MAX_BYTES}`, `files[${i}].content_b64`);
    total += bytes.length;
    if (total > FILES_TOTAL_MAX_BYTES) throw invalid(`body.files[${i}].content_b64: the files hold more than ${FILES_TOTAL_MAX_BYTES} bytes in all`, `files[${i}].content_b64`);
    return bytes;
  });
  const noteBuf = Buffer.from(c.note, 'utf8');
  const objects = files.map((f, i) => {
    const id = newId('lgo_');
    const bytes = decoded[i]!;
    return {
      id,
      plan_id: planId,
      version,
      position: i,
      name: f.name,
      content_type: f.content_type ?? 'application/octet-stream',
      byte_len: bytes.length,
      sha256: `0x${sha256Hex(bytes)}`,
      content_sealed: sealer.seal(bytes, objectAad(planId, id)),
      created_at: at,
      replaced_at: null,
    };
  });
  return { note: sealer.seal(noteBuf, noteAad(planId, version)), noteBytes: noteBuf.length, objects };
}
