import { createHmac, timingSafeEqual } from 'node:crypto';

/** Spec §6.2: the header value `sha256=<hex HMAC-SHA256 of the raw body>`, keyed with the secret as returned. */
export function signBody(body: string | Buffer, secret: string): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}

/**
 * For receivers: true when `header` is the signature of the exact bytes received. Compare in
 * constant time; pass the raw body, never re-serialized JSON.
 */
export function verifySignature(rawBody: string | Buffer, header: string | undefined | null, secret: string): boolean {
  if (typeof header !== 'string' || !/^sha256=[0-9a-f]{64}$/i.test(header.trim())) return false;
  const expected = Buffer.from(signBody(rawBody, secret), 'utf8');
  const received = Buffer.from(`sha256=${header.trim().slice(7).toLowerCase()}`, 'utf8');
  return expected.length === received.length && timingSafeEqual(expected, received);
}
