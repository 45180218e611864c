import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

/**
 * AES-256-GCM sealing for content at rest. Layout: version byte 1 || 12-byte nonce || ciphertext || 16-byte tag.
 * `aad` binds a ciphertext to its row (for example the owning id) so it cannot be moved to another.
 */
export class Sealer {
  private readonly key: Buffer;
  constructor(key: Uint8Array) {
    if (key.length !== 32) throw new Error('seal key must be 32 bytes');
    this.key = Buffer.from(key);
  }

  seal(plain: Uint8Array | string, aad = ''): Buffer {
    const iv = randomBytes(12);
    const c = createCipheriv('aes-256-gcm', this.key, iv);
    c.setAAD(Buffer.from(aad));
    const body = Buffer.concat([c.update(typeof plain === 'string' ? Buffer.from(plain) : plain), c.final()]);
    return Buffer.concat([Buffer.from([1]), iv, body, c.getAuthTag()]);
  }

  open(sealed: Uint8Array, aad = ''): Buffer {
    const buf = Buffer.from(sealed);
    if (buf.length < 29 || buf[0] !== 1) throw new Error('not a sealed value');
    const d = createDecipheriv('aes-256-gcm', this.key, buf.subarray(1, 13));
    d.setAAD(Buffer.from(aad));
    d.setAuthTag(buf.subarray(buf.length - 16));
    return Buffer.concat([d.update(buf.subarray(13, buf.length - 16)), d.final()]);
  }
}
