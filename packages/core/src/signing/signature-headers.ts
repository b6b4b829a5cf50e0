import { createHmac } from 'node:crypto';
import { signBody } from './signature.js';

/**
 * Standard Webhooks (https://www.standardwebhooks.com): `v1,` + base64 HMAC-SHA256 of
 * `<id>.<timestamp>.<raw body>`. The key is the secret's bytes exactly as the create call
 * returned it (the 64 hex characters as UTF-8), the same key as X-Service-Signature, so a
 * receiver configures a Standard Webhooks library with `whsec_` + base64 of that secret.
 */
export function signStandardWebhook(id: string, timestampSeconds: number, body: string | Buffer, secret: string): string {
  const mac = createHmac('sha256', Buffer.from(secret, 'utf8')).update(`${id}.${timestampSeconds}.`).update(body);
  return `v1,${mac.digest('base64')}`;
}

/**
 * Every signature header of one attempt, signed now: the v1 `X-Service-Signature` (spec §6.2,
 * unchanged) and, beside it, the Standard Webhooks `webhook-id` (= X-Service-Delivery-Id),
 * `webhook-timestamp` (Unix seconds of this signing: each attempt gets its own, so a receiver
 * can refuse a replayed capture) and `webhook-signature`. During a rotation's overlap,
 * `webhook-signature` carries one signature per valid secret, the new one first, separated by a
 * space (as the Standard Webhooks specification allows), so a receiver holding either secret
 * verifies; `X-Service-Signature` is made with the new secret only.
 */
export function signatureHeaders(input: { deliveryId: string; body: Buffer; secret: string; previousSecret?: string | null; signedAt?: Date }): Record<string, string> {
  const timestamp = Math.floor((input.signedAt ?? new Date()).getTime() / 1000);
  const signatures = [input.secret, ...(input.previousSecret ? [input.previousSecret] : [])].map((secret) =>
    signStandardWebhook(input.deliveryId, timestamp, input.body, secret),
  );
  return {
    'x-service-signature': signBody(input.body, input.secret),
    'webhook-id': input.deliveryId,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': signatures.join(' '),
  };
}

/** The Standard Webhooks form of a secret: `whsec_` + base64 of its characters, as a Standard Webhooks library is configured. */
export function standardWebhooksSecret(secret: string): string {
  return `whsec_${Buffer.from(secret, 'utf8').toString('base64')}`;
}
