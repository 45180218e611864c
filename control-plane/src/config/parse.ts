import { z } from 'zod';

/** Building blocks of the environment schema: every piece of config/ uses these. */
export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n  ${problems.join('\n  ')}`);
    this.name = 'ConfigError';
  }
}

export const optionalSecret = (name: string) =>
  z
    .string()
    .min(16, `${name} must be at least 16 characters`)
    .optional()
    .or(z.literal('').transform(() => undefined));

export const hex32 = z
  .string()
  .regex(/^(0x)?[0-9a-fA-F]{64}$/, 'must be 32 bytes of hex (64 hex digits, optional 0x)')
  .transform((s) => (s.startsWith('0x') ? s : `0x${s}`) as `0x${string}`);

export const intWithDefault = (def: number, min = 0, max = Number.MAX_SAFE_INTEGER) =>
  z.coerce.number().int().min(min).max(max).default(def);

/** A blank value means "unset": defaults apply and optional settings stay off. */
export const blankIsUnset = (v: unknown) => (typeof v === 'string' && v.trim() === '' ? undefined : v);

/** A true/false switch: `true`, `false`, `1` or `0`. */
export const flag = (def: boolean) =>
  z.enum(['true', 'false', '1', '0']).default(def ? 'true' : 'false').transform((v) => v === 'true' || v === '1');

/** A JSON env value checked by a schema; the message names the failing path. */
export function jsonEnv<S extends z.ZodType, T>(schema: S, empty: T, what: string, map: (v: z.infer<S>) => T) {
  return z
    .string()
    .optional()
    .transform((raw, ctx): T => {
      if (raw === undefined) return empty;
      let json: unknown;
      try {
        json = JSON.parse(raw);
      } catch (e) {
        ctx.addIssue({ code: 'custom', message: `must be ${what} (${(e as Error).message})` });
        return z.NEVER;
      }
      const r = schema.safeParse(json);
      if (!r.success) {
        const i = r.error.issues[0]!;
        const where = i.path.map((p) => (typeof p === 'number' ? `[${p}]` : `.${String(p)}`)).join('');
        ctx.addIssue({ code: 'custom', message: `${where ? `${where}: ` : ''}${i.message}` });
        return z.NEVER;
      }
      return map(r.data);
    });
}
