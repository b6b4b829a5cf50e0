/**
 * The one place that turns what a receiver answered into what people see. The dispatcher keeps
 * the receiver's first bytes exactly (`delivery_attempts.response_excerpt_bytes`); people get
 * both a readable text and the exact bytes (docs/api-behaviour.md, "Response excerpts").
 */

/** How much of a response body the delivery log keeps, in bytes. */
export const RESPONSE_EXCERPT_BYTES = 512;

export interface PresentedResponseExcerpt {
  /** The bytes as UTF-8, each invalid sequence and each NUL as U+FFFD: for reading, not for comparing. */
  responseExcerpt: string | null;
  /** The exact bytes the receiver sent, base64 (RFC 4648, with padding). */
  responseExcerptBase64: string | null;
}

const NUL = /\u0000/g;

/** Readable text of a receiver's bytes: never holds a NUL (Postgres `text` cannot) nor a lone surrogate. */
export function excerptText(bytes: Buffer): string {
  // Buffer#toString('utf8') replaces every invalid sequence with U+FFFD (WHATWG decoding).
  return bytes.toString('utf8').replace(NUL, '\uFFFD');
}

/**
 * What people see of a stored excerpt. `stored` is the bytes column, or for rows written before
 * the bytes were kept (issue 8), their text column: those present as their UTF-8 bytes.
 */
export function presentResponseExcerpt(stored: Buffer | string | null): PresentedResponseExcerpt {
  if (stored === null) return { responseExcerpt: null, responseExcerptBase64: null };
  const bytes = typeof stored === 'string' ? Buffer.from(stored, 'utf8') : stored;
  return { responseExcerpt: excerptText(bytes), responseExcerptBase64: bytes.toString('base64') };
}

/** The stored excerpt of a `delivery_attempts` row: its bytes, or the text of an older row. */
export function storedExcerptOf(row: { response_excerpt_bytes?: Buffer | null; response_excerpt: string | null }): Buffer | string | null {
  return row.response_excerpt_bytes ?? row.response_excerpt;
}
