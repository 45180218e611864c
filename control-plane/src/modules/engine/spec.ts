import { canonicalize, invalid, sha256Hex } from '@svc/shared';
import type { EngineParameters } from '../../db/schema-engine.ts';
import { ENGINE_PREFIX } from '../inference/engine-model.ts';

/** A slug: 1 to 64 lower-case letters, digits and inner hyphens (no leading, trailing or doubled hyphen). */
export const SLUG_PATTERN = /^[a-z0-9](?:-?[a-z0-9]){0,63}$/;
export const SLUG_RULE = '1 to 64 lower-case letters, digits and single inner hyphens (a-z, 0-9, -)';

export const validSlug = (s: string): boolean => s.length <= 64 && SLUG_PATTERN.test(s);

/** What `engine/<slug>` or `engine/<slug>@<version>` names; a malformed name is refused (400 naming `model`). */
export function parseEngineModel(model: string): { slug: string; version: number | null } {
  const rest = model.slice(ENGINE_PREFIX.length);
  const at = rest.indexOf('@');
  const slug = at < 0 ? rest : rest.slice(0, at);
  const pin = at < 0 ? null : rest.slice(at + 1);
  if (!validSlug(slug)) throw invalid(`model: "${model}" is not an engine name: engine/<slug> or engine/<slug>@<version>, the slug ${SLUG_RULE}`, 'model');
  if (pin !== null && !/^[1-9][0-9]{0,8}$/.test(pin)) throw invalid(`model: "${model}" pins no version: after @ comes a version number (1, 2, ...)`, 'model');
  return { slug, version: pin === null ? null : Number(pin) };
}

export const engineName = (slug: string, version?: number) => `${ENGINE_PREFIX}${slug}${version === undefined ? '' : `@${version}`}`;

/** The configuration a build serves, as its canonical spec holds it: the prompt's digest, never its text. */
export interface EngineSpec {
  guardrail_policy: { id: string; sha256: string } | null;
  kind: 'engine_build_spec';
  model: string;
  parameters: EngineParameters;
  slug: string;
  system_prompt_sha256: string | null;
  v: 1;
}

export const promptDigest = (prompt: string): string => sha256Hex(Buffer.from(prompt, 'utf8'));

/** The spec's RFC 8785 canonical JSON and `spec_sha256`, the hex sha256 of its UTF-8 bytes. */
export function specOf(s: Omit<EngineSpec, 'kind' | 'v'>): { spec: EngineSpec; canonical: string; sha256: string } {
  const spec: EngineSpec = { guardrail_policy: s.guardrail_policy, kind: 'engine_build_spec', model: s.model, parameters: s.parameters, slug: s.slug, system_prompt_sha256: s.system_prompt_sha256, v: 1 };
  const canonical = canonicalize(spec);
  return { spec, canonical, sha256: sha256Hex(Buffer.from(canonical, 'utf8')) };
}
