import { canonicalize, recoverPersonalMessage, sha256Hex, type SignedReceipt } from '@svc/shared';
import { nestsDeeper } from '../../http/body.ts';
import type { ReceiptSigner } from '../money/signer.ts';
import { embedProvenance, isPng, readProvenance, stripProvenance } from './png.ts';

/**
 * Provenance manifests. A manifest is a small JSON document bound to one generated asset and to the
 * receipt that billed it; its RFC 8785 canonical JSON is signed with EIP-191 (personal_sign) by the
 * gateway's receipt key. In a PNG it travels inside the file as an iTXt chunk `svc-provenance` whose text
 * is the canonical JSON of `{manifest, signature}`; `asset_sha256` is the sha256 of the file without that
 * chunk (so embedding does not change the hash it covers). A video's manifest is kept beside the asset
 * (in the job object), and covers the mp4 bytes as served.
 */
export interface Manifest {
  v: 1;
  type: 'svc.provenance';
  media_type: string;
  asset_sha256: string;
  model: string;
  created_at: string;
  request_id: string;
  receipt_id: string;
  /** 0x sha256 of the receipt's canonical JSON. */
  receipt_hash: string;
  signer: string;
  /** The image's position in its response, or the video job id. */
  index?: number;
  job_id?: string;
}

export interface Provenance {
  manifest: Manifest;
  signature: string;
}

/**
 * The bytes a manifest's asset_sha256 covers: a PNG without its provenance chunk, anything else as is. `all`:
 * without every provenance chunk (an upstream's image, before ours goes in); else without the first only.
 */
export function assetBytes(asset: Uint8Array, all = true): Buffer {
  return (isPng(asset) ? stripProvenance(asset, all) : null) ?? Buffer.from(asset);
}

/** The digest a verifier compares: any provenance chunk past the first (the manifest's) is part of the asset. */
export const assetSha256 = (asset: Uint8Array) => sha256Hex(assetBytes(asset, false));

export function signManifest(
  signer: ReceiptSigner,
  m: { mediaType: string; assetSha256: string; model: string; createdAt: Date; receipt: SignedReceipt; index?: number; jobId?: string },
): Provenance {
  const manifest: Manifest = {
    v: 1,
    type: 'svc.provenance',
    media_type: m.mediaType,
    asset_sha256: m.assetSha256,
    model: m.model,
    created_at: m.createdAt.toISOString(),
    request_id: m.receipt.payload.id,
    receipt_id: m.receipt.payload.id,
    receipt_hash: m.receipt.hash,
    signer: signer.address,
    ...(m.index !== undefined ? { index: m.index } : {}),
    ...(m.jobId !== undefined ? { job_id: m.jobId } : {}),
  };
  const signed = signer.signDocument(manifest);
  return { manifest, signature: signed.signature };
}

/** A PNG with its provenance embedded. */
export const embed = (png: Uint8Array, p: Provenance) => embedProvenance(png, canonicalize(p));

export interface VerifyInput {
  asset?: Buffer | undefined;
  /** Instead of the asset: its sha256 (hex), for an asset too large to send. */
  assetSha256?: string | undefined;
  manifest?: unknown;
  signature?: string | undefined;
}

export interface VerifyResult {
  manifest_found: boolean;
  manifest_source: 'embedded' | 'supplied' | null;
  signature_valid: boolean;
  hash_matches: boolean;
  /** The address the signature recovers to, or null. */
  signer: string | null;
  signer_is_gateway: boolean;
  gateway_signer: string;
  asset_sha256: string | null;
  manifest: Record<string, unknown> | null;
  /** All four: a manifest, a valid signature, the asset matches, and this gateway signed it. */
  verified: boolean;
  reasons: string[];
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A supplied manifest: an object or its JSON text; a whole `{manifest, signature}` provenance object is unwrapped. */
function parseSupplied(v: unknown): { manifest: Record<string, unknown> | null; signature: string | undefined; tooDeep?: true } {
  let m = v;
  if (typeof m === 'string') {
    try {
      m = JSON.parse(m);
    } catch {
      return { manifest: null, signature: undefined };
    }
  }
  if (!isObject(m)) return { manifest: null, signature: undefined };
  if (nestsDeeper(m)) return { manifest: null, signature: undefined, tooDeep: true };
  if (isObject(m.manifest) && typeof m.signature === 'string' && !('asset_sha256' in m)) return { manifest: m.manifest, signature: m.signature };
  return { manifest: m, signature: undefined };
}

/**
 * Checks the three things independently. `manifest_found`: a manifest was supplied or is embedded in the
 * asset. `signature_valid`: the signature recovers (EIP-191 over the manifest's canonical JSON) to the
 * address the manifest names as `signer`; a manifest altered after signing recovers to another address, so
 * it is invalid. A manifest validly signed by some other key is `signature_valid` with `signer_is_gateway`
 * false. `hash_matches`: the asset's sha256 (PNG: without its provenance chunk) equals `asset_sha256`.
 */
export function verifyProvenance(input: VerifyInput, gatewaySigner: string): VerifyResult {
  const reasons: string[] = [];
  let manifest: Record<string, unknown> | null = null;
  let signature = input.signature;
  let source: VerifyResult['manifest_source'] = null;
  if (input.manifest !== undefined && input.manifest !== null) {
    const s = parseSupplied(input.manifest);
    manifest = s.manifest;
    signature ??= s.signature;
    if (manifest) source = 'supplied';
    else reasons.push(s.tooDeep ? 'manifest: nests too deep' : 'manifest: not a JSON object');
  } else if (input.asset) {
    const text = isPng(input.asset) ? readProvenance(input.asset) : null;
    if (text === null) reasons.push(isPng(input.asset) ? 'asset: the PNG carries no svc-provenance chunk' : 'asset: no embedded manifest (only PNG images embed one; pass the manifest beside the asset)');
    else {
      const s = parseSupplied(text);
      manifest = s.manifest;
      signature ??= s.signature;
      if (manifest) source = 'embedded';
      else reasons.push(s.tooDeep ? 'asset: the svc-provenance chunk nests too deep' : 'asset: the svc-provenance chunk does not hold a JSON manifest');
    }
  }

  let recovered: string | null = null;
  let signatureValid = false;
  if (manifest) {
    let canonical: string | null = null;
    try {
      canonical = canonicalize(manifest);
    } catch {
      reasons.push('manifest: cannot be canonicalized');
    }
    if (!signature) reasons.push('signature: none supplied or embedded');
    else if (canonical !== null) {
      recovered = recoverPersonalMessage(canonical, signature);
      const claimed = typeof manifest.signer === 'string' ? manifest.signer : null;
      signatureValid = recovered !== null && claimed !== null && recovered.toLowerCase() === claimed.toLowerCase();
      if (recovered === null) reasons.push('signature: malformed or does not recover');
      else if (!claimed) reasons.push('manifest: names no signer');
      else if (!signatureValid) reasons.push('signature: recovers to another address than the manifest names (altered or signed by someone else)');
    }
  }

  const digest = input.asset ? assetSha256(input.asset) : (input.assetSha256?.toLowerCase() ?? null);
  const hashMatches = digest !== null && manifest !== null && typeof manifest.asset_sha256 === 'string' && manifest.asset_sha256.toLowerCase() === digest;
  if (digest === null) reasons.push('asset: none supplied, so the hash was not checked');
  else if (manifest && !hashMatches) reasons.push('asset: its sha256 differs from the manifest asset_sha256');

  const signerIsGateway = signatureValid && recovered!.toLowerCase() === gatewaySigner.toLowerCase();
  if (signatureValid && !signerIsGateway) reasons.push('signer: not this gateway');
  return {
    manifest_found: manifest !== null,
    manifest_source: source,
    signature_valid: signatureValid,
    hash_matches: hashMatches,
    signer: recovered,
    signer_is_gateway: signerIsGateway,
    gateway_signer: gatewaySigner,
    asset_sha256: digest,
    manifest,
    verified: manifest !== null && signatureValid && hashMatches && signerIsGateway,
    reasons,
  };
}
