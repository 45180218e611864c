import { privateKeyToAddress, signPersonalMessage, signReceipt, canonicalize, type Hex, type ReceiptPayload, type SignedReceipt } from '@svc/shared';

/** The gateway's receipt signer (secp256k1, EIP-191). Also signs statements, proofs and reports. */
export class ReceiptSigner {
  readonly address: Hex;
  constructor(private readonly key: Hex) {
    this.address = privateKeyToAddress(key);
  }

  signReceipt(payload: Omit<ReceiptPayload, 'signer'>): SignedReceipt {
    return signReceipt(this.key, { ...payload, signer: this.address } as ReceiptPayload);
  }

  /** Signs any JSON document as RFC 8785 canonical JSON; the answer carries what a verifier needs. */
  signDocument<T extends object>(document: T): { document: T; canonical: string; signature: Hex; signer: Hex; scheme: string } {
    const canonical = canonicalize(document);
    return { document, canonical, signature: signPersonalMessage(this.key, canonical), signer: this.address, scheme: 'eip191-personal_sign/rfc8785' };
  }
}
