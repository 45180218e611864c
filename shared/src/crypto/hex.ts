export type Hex = `0x${string}`;

export function toHex(bytes: Uint8Array): Hex {
  return `0x${Buffer.from(bytes).toString('hex')}`;
}

export function fromHex(hex: string): Uint8Array {
  const h = hex.startsWith('0x') || hex.startsWith('0X') ? hex.slice(2) : hex;
  if (h.length % 2 !== 0 || !/^[0-9a-fA-F]*$/.test(h)) throw new Error('not a hex string');
  return new Uint8Array(Buffer.from(h, 'hex'));
}

export function isHex(s: unknown, bytes?: number): s is Hex {
  if (typeof s !== 'string' || !/^0x[0-9a-fA-F]*$/.test(s) || s.length % 2 !== 0) return false;
  return bytes === undefined || s.length === 2 + bytes * 2;
}
