// Generating Idempotency-Key values for POSTs the client may retry.

/** The part of Web Crypto used here; `globalThis.crypto` fits. */
export interface CryptoLike {
  randomUUID?: () => string;
  getRandomValues?: <T extends Uint8Array>(array: T) => T;
}

/**
 * A random UUID v4 for an Idempotency-Key.
 *
 * `crypto.randomUUID` is missing in Node 18 without a flag and on pages served
 * over plain http (it needs a secure context), while `getRandomValues` works
 * there; a self-hosted dashboard on http is a real case. Math.random is the
 * last resort: a key only has to be unique within one project for 24 hours.
 */
export function generateIdempotencyKey(
  crypto: CryptoLike | undefined = (globalThis as { crypto?: CryptoLike }).crypto,
): string {
  if (typeof crypto?.randomUUID === "function") return crypto.randomUUID();

  const bytes = new Uint8Array(16);
  if (typeof crypto?.getRandomValues === "function") {
    crypto.getRandomValues(bytes);
  } else {
    for (let i = 0; i < bytes.length; i++) bytes[i] = Math.floor(Math.random() * 256);
  }
  bytes[6] = (bytes[6]! & 0x0f) | 0x40; // version 4
  bytes[8] = (bytes[8]! & 0x3f) | 0x80; // RFC 4122 variant
  const hex = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
