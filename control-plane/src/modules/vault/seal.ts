import { Sealer } from '@svc/shared';

/**
 * Vault sealing: every content value under its own AES-256-GCM nonce (the project's Sealer draws one per
 * call), bound by its additional data to the row and field it belongs to (`vault:<what>:<id>:<field>`), so
 * a sealed value copied to another row or field does not open.
 */
export class VaultSeal {
  private readonly sealer: Sealer;
  constructor(key: Uint8Array) {
    this.sealer = new Sealer(key);
  }

  text(value: string, aad: string): Buffer {
    return this.sealer.seal(value, `vault:${aad}`);
  }
  openText(sealed: Uint8Array, aad: string): string {
    return this.sealer.open(sealed, `vault:${aad}`).toString('utf8');
  }
  /** null stays null (an optional field left out). */
  optional(value: string | null | undefined, aad: string): Buffer | null {
    return value === null || value === undefined ? null : this.text(value, aad);
  }
  openOptional(sealed: Uint8Array | null, aad: string): string | null {
    return sealed ? this.openText(sealed, aad) : null;
  }

  bytes(value: Uint8Array, aad: string): Buffer {
    return this.sealer.seal(value, `vault:${aad}`);
  }
  openBytes(sealed: Uint8Array, aad: string): Buffer {
    return this.sealer.open(sealed, `vault:${aad}`);
  }

  /** An amount in micro-USD (a safe non-negative integer), sealed as its decimal text. */
  amount(value: number, aad: string): Buffer {
    if (!Number.isSafeInteger(value) || value < 0) throw new Error(`vault: not an amount: ${value}`);
    return this.text(String(value), aad);
  }
  openAmount(sealed: Uint8Array, aad: string): number {
    const n = Number(this.openText(sealed, aad));
    if (!Number.isSafeInteger(n) || n < 0) throw new Error(`vault: sealed amount ${aad} does not read as an amount`);
    return n;
  }

  json(value: unknown, aad: string): Buffer {
    return this.text(JSON.stringify(value), aad);
  }
  openJson<T>(sealed: Uint8Array, aad: string): T {
    return JSON.parse(this.openText(sealed, aad)) as T;
  }
}
