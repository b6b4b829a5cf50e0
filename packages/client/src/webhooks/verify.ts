import { createHmac, timingSafeEqual } from 'node:crypto';
import { WebhookVerificationError } from '../errors.js';
import type { WebhookEvent } from './events.js';

/** Headers as Node, Express, fetch or a plain object give them. */
export type HeaderSource = Headers | Record<string, string | string[] | undefined>;

export interface VerifyOptions {
  /**
   * How far `webhook-timestamp` may be from now, in seconds, either way (replay protection).
   * Default 300, as the Standard Webhooks libraries.
   */
  toleranceSeconds?: number;
  /**
   * Refuse deliveries without the Standard Webhooks headers (`webhook-id`, `webhook-timestamp`,
   * `webhook-signature`). Default true: every attempt the service sends carries them, and the v1
   * `X-Service-Signature` alone covers no time, so a captured delivery stripped of them could be
   * replayed forever. Set false only for a sender that predates them.
   */
  requireTimestamp?: boolean;
  /** The clock, for tests. */
  now?: () => Date;
}

/** What a verified delivery carries. */
export interface VerifiedDelivery {
  /** `X-Service-Delivery-Id`: the same across retries of one delivery; deduplicate with it (spec §6.3). */
  deliveryId: string | null;
  event: WebhookEvent;
}

const V1_SIGNATURE = /^sha256=([0-9a-fA-F]{64})$/;

function header(headers: HeaderSource, name: string): string | undefined {
  if (typeof (headers as Headers).get === 'function') return (headers as Headers).get(name) ?? undefined;
  const record = headers as Record<string, string | string[] | undefined>;
  const value = record[name] ?? Object.entries(record).find(([key]) => key.toLowerCase() === name)?.[1];
  return Array.isArray(value) ? value[0] : value;
}

function sameBytes(a: Buffer, b: Buffer): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}

function toBuffer(rawBody: string | Uint8Array): Buffer {
  if (typeof rawBody === 'string') return Buffer.from(rawBody, 'utf8');
  if (rawBody instanceof Uint8Array) return Buffer.from(rawBody.buffer, rawBody.byteOffset, rawBody.byteLength);
  throw new WebhookVerificationError('invalid_body', 'pass the raw body bytes (a Buffer or string), not parsed JSON');
}

/**
 * The secret, or the secrets, a receiver accepts: exactly as the service returned them (64
 * hexadecimal characters). During a rotation give both, `[oldSecret, newSecret]`: a delivery
 * verifies when any of them signed it.
 */
export type WebhookSecrets = string | readonly string[];

/** The HMAC keys of the secrets given, refusing none or a blank one. */
function secretList(secrets: WebhookSecrets): readonly string[] {
  const list = typeof secrets === 'string' ? [secrets] : Array.isArray(secrets) ? (secrets as readonly unknown[]) : [];
  if (list.length === 0 || list.some((secret) => typeof secret !== 'string' || secret.length === 0)) {
    throw new TypeError('secret is required: a non-empty string, or a non-empty list of them');
  }
  return list as readonly string[];
}

/**
 * Verifies a delivery and returns its event. Checks `X-Service-Signature` (HMAC-SHA256 of the
 * raw bytes keyed with the secret as returned, spec §6.2) in constant time, and the Standard
 * Webhooks headers (`webhook-id`, `webhook-timestamp`, `webhook-signature`) with the timestamp's
 * tolerance; without them the delivery is refused unless `requireTimestamp: false`. Throws
 * WebhookVerificationError with a reason otherwise.
 *
 * `secret` may be a list: each signature verifies when any secret of the list made it. During a
 * rotation's overlap `webhook-signature` carries one signature per valid secret (new first) and
 * `X-Service-Signature` is made with the new secret only, so a receiver holding
 * `[oldSecret, newSecret]` accepts every attempt from the rotation on; drop the old one after
 * `previousSecretExpiresAt`.
 */
export function verifyWebhookDelivery(rawBody: string | Uint8Array, headers: HeaderSource, secret: WebhookSecrets, options: VerifyOptions = {}): VerifiedDelivery {
  const secrets = secretList(secret);
  const body = toBuffer(rawBody);
  const v1 = header(headers, 'x-service-signature')?.trim();
  if (!v1) throw new WebhookVerificationError('missing_signature', 'no X-Service-Signature header');
  const match = V1_SIGNATURE.exec(v1);
  const given = match ? Buffer.from(match[1]!.toLowerCase(), 'hex') : undefined;
  if (!given || !anyMatches(secrets, (key) => sameBytes(given, createHmac('sha256', key).update(body).digest()))) {
    throw new WebhookVerificationError('invalid_signature', 'X-Service-Signature does not match the body');
  }

  const deliveryId = header(headers, 'x-service-delivery-id') ?? null;
  const id = header(headers, 'webhook-id');
  const timestamp = header(headers, 'webhook-timestamp');
  const signatures = header(headers, 'webhook-signature');
  if (timestamp === undefined || signatures === undefined || id === undefined) {
    if (options.requireTimestamp ?? true) throw new WebhookVerificationError('missing_timestamp', 'no Standard Webhooks headers (webhook-id, webhook-timestamp, webhook-signature)');
  } else {
    verifyStandard(body, secrets, { id, timestamp, signatures }, options);
    if (deliveryId !== null && deliveryId !== id) throw new WebhookVerificationError('id_mismatch', 'webhook-id differs from X-Service-Delivery-Id');
  }
  return { deliveryId: deliveryId ?? id ?? null, event: parseEvent(body) };
}

/** {@link verifyWebhookDelivery}, returning the event alone. */
export function verifyWebhook(rawBody: string | Uint8Array, headers: HeaderSource, secret: WebhookSecrets, options: VerifyOptions = {}): WebhookEvent {
  return verifyWebhookDelivery(rawBody, headers, secret, options).event;
}

/** True when a secret of the list passes the check; every secret is tried, so the time taken does not tell which one did. */
function anyMatches(secrets: readonly string[], check: (key: string) => boolean): boolean {
  let ok = false;
  for (const secret of secrets) ok = check(secret) || ok;
  return ok;
}

function verifyStandard(
  body: Buffer,
  secrets: readonly string[],
  parts: { id: string; timestamp: string; signatures: string },
  options: VerifyOptions,
): void {
  if (!/^\d{1,12}$/.test(parts.timestamp.trim())) throw new WebhookVerificationError('invalid_timestamp', 'webhook-timestamp is not Unix seconds');
  const sentAt = Number(parts.timestamp.trim());
  const now = Math.floor((options.now?.() ?? new Date()).getTime() / 1000);
  const tolerance = options.toleranceSeconds ?? 300;
  if (sentAt < now - tolerance) throw new WebhookVerificationError('timestamp_too_old', `webhook-timestamp is more than ${tolerance} s old`);
  if (sentAt > now + tolerance) throw new WebhookVerificationError('timestamp_too_new', `webhook-timestamp is more than ${tolerance} s in the future`);
  // One signature per secret the sender holds, space-separated; each `v1,<base64>`.
  const given = parts.signatures
    .split(' ')
    .filter((entry) => entry.startsWith('v1,'))
    .map((entry) => Buffer.from(entry.slice(3), 'base64'));
  // Keyed with the secret's bytes exactly as returned: the same key as whsec_ + base64(secret).
  const ok = anyMatches(secrets, (secret) => {
    const expected = createHmac('sha256', secret).update(`${parts.id}.${parts.timestamp.trim()}.`).update(body).digest();
    return given.some((signature) => sameBytes(signature, expected));
  });
  if (!ok) throw new WebhookVerificationError('invalid_signature', 'webhook-signature does not match the body');
}

function parseEvent(body: Buffer): WebhookEvent {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    throw new WebhookVerificationError('invalid_body', 'the body is not JSON');
  }
  const event = parsed as Partial<WebhookEvent> | null;
  if (!event || typeof event !== 'object' || typeof event.event !== 'string' || typeof event.timestamp !== 'string' || !event.data || typeof event.data !== 'object') {
    throw new WebhookVerificationError('invalid_body', 'the body is not an event envelope { event, timestamp, data }');
  }
  return event as WebhookEvent;
}
