import { crc32 } from 'node:zlib';

/**
 * Just enough PNG to carry a provenance manifest: walk the chunk list, and add, find or remove an iTXt
 * chunk with our keyword. The walk is structural (lengths and types); CRCs of other chunks are not
 * checked, so an image whose pixels were altered still yields its manifest (and fails the hash check).
 * Chunks we write carry a correct CRC-32 over type and data (node:zlib crc32).
 */
export const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
export const PROVENANCE_KEYWORD = 'svc-provenance';

export interface Chunk {
  type: string;
  data: Buffer;
  /** Offset of the chunk (its length field) and of the byte after its CRC. */
  start: number;
  end: number;
}

export const isPng = (b: Uint8Array) => b.length >= 8 && Buffer.from(b.subarray(0, 8)).equals(PNG_SIGNATURE);

/** The chunks of a PNG, or null when it is not one (bad signature, a length past the end, no IHDR first or IEND last). */
export function pngChunks(png: Uint8Array): Chunk[] | null {
  const b = Buffer.from(png.buffer, png.byteOffset, png.byteLength);
  if (!isPng(b)) return null;
  const out: Chunk[] = [];
  let at = 8;
  while (at + 12 <= b.length) {
    const len = b.readUInt32BE(at);
    const end = at + 12 + len;
    if (len > 0x7fffffff || end > b.length) return null;
    const type = b.toString('latin1', at + 4, at + 8);
    if (!/^[A-Za-z]{4}$/.test(type)) return null;
    out.push({ type, data: b.subarray(at + 8, at + 8 + len), start: at, end });
    at = end;
    if (type === 'IEND') break;
  }
  if (out[0]?.type !== 'IHDR' || out.at(-1)?.type !== 'IEND' || at !== b.length) return null;
  return out;
}

/** One chunk with its CRC. */
export function chunk(type: string, data: Uint8Array): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(data.length, 0);
  head.write(type, 4, 'latin1');
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(Buffer.concat([head.subarray(4), data])) >>> 0, 0);
  return Buffer.concat([head, data, crc]);
}

/** iTXt: keyword NUL, compression flag 0, method 0, empty language tag NUL, empty translated keyword NUL, UTF-8 text. */
export function itxt(keyword: string, text: string): Buffer {
  return chunk('iTXt', Buffer.concat([Buffer.from(keyword, 'latin1'), Buffer.from([0, 0, 0, 0, 0]), Buffer.from(text, 'utf8')]));
}

/** The text of an uncompressed iTXt or tEXt chunk with this keyword; null for any other chunk. */
function textOf(c: Chunk, keyword: string): string | null {
  if (c.type !== 'iTXt' && c.type !== 'tEXt') return null;
  const nul = c.data.indexOf(0);
  if (nul < 0 || c.data.toString('latin1', 0, nul) !== keyword) return null;
  if (c.type === 'tEXt') return c.data.toString('latin1', nul + 1);
  if (c.data[nul + 1] !== 0) return null; // compressed iTXt: never ours
  const lang = c.data.indexOf(0, nul + 3);
  const translated = lang < 0 ? -1 : c.data.indexOf(0, lang + 1);
  return translated < 0 ? null : c.data.toString('utf8', translated + 1);
}

const isProvenance = (c: Chunk) => textOf(c, PROVENANCE_KEYWORD) !== null;

/**
 * The PNG without its provenance chunk: the bytes a manifest's asset_sha256 covers. `all` removes every one
 * (an upstream's image before ours is embedded); otherwise only the first, the one a verifier reads the
 * manifest from, so that chunks added after it count as changes. Null if not a PNG.
 */
export function stripProvenance(png: Uint8Array, all = true): Buffer | null {
  const chunks = pngChunks(png);
  if (!chunks) return null;
  const b = Buffer.from(png.buffer, png.byteOffset, png.byteLength);
  let stripped = false;
  const kept = chunks.filter((c) => {
    if ((stripped && !all) || !isProvenance(c)) return true;
    stripped = true;
    return false;
  });
  return Buffer.concat([PNG_SIGNATURE, ...kept.map((c) => b.subarray(c.start, c.end))]);
}

/** The text of the first provenance chunk, or null. */
export function readProvenance(png: Uint8Array): string | null {
  for (const c of pngChunks(png) ?? []) {
    const t = textOf(c, PROVENANCE_KEYWORD);
    if (t !== null) return t;
  }
  return null;
}

/** The PNG with any earlier provenance chunk removed and `text` added as an iTXt chunk just before IEND. */
export function embedProvenance(png: Uint8Array, text: string): Buffer {
  const stripped = stripProvenance(png);
  if (!stripped) throw new Error('not a well-formed PNG');
  const iend = stripped.length - 12;
  return Buffer.concat([stripped.subarray(0, iend), itxt(PROVENANCE_KEYWORD, text), stripped.subarray(iend)]);
}

/** The media type of an image by its magic bytes. */
export function sniffImage(b: Uint8Array): string {
  if (isPng(b)) return 'image/png';
  if (b.length >= 3 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff) return 'image/jpeg';
  if (b.length >= 12 && Buffer.from(b.subarray(0, 4)).toString('latin1') === 'RIFF' && Buffer.from(b.subarray(8, 12)).toString('latin1') === 'WEBP') return 'image/webp';
  return 'application/octet-stream';
}
