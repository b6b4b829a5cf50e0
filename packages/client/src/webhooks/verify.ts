// The one webhook verifier of the library. It uses only what every runtime that receives HTTP has
// (Web Crypto's `crypto.subtle`, `TextEncoder`, `atob`, `Uint8Array`): no Node built-in, no Buffer,
// so the same code runs in Node 20/22/24, Deno, Bun, Cloudflare Workers and browsers. The Node
// handler (handler.ts) is built on it.
import { WebhookVerificationError } from '../errors.js';
import type { WebhookEvent } from './events.js';

/** What a fetch `Headers` object offers: a case-insensitive `get`. */
export interface HeaderGetter {
  get(name: string): string | null;
}

/** Headers as fetch (`Headers`), Node, Express or a plain object give them; a plain object's names may be in any case. */
export type HeaderSource = HeaderGetter | Record<string, string | string[] | undefined>;

/** A webhook's raw body: the bytes as received (a `Uint8Array`, Node's `Buffer`, an `ArrayBuffer`) or the same text. */
export type RawBody = string | Uint8Array | ArrayBuffer;

/** What {@link verifyWebhookRequest} needs of a fetch `Request`: its headers and one read of its body. */
export interface WebhookRequest {
  readonly headers: HeaderGetter;
  arrayBuffer(): Promise<ArrayBuffer>;
}

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
  /** `X-Service-Delivery-Id`: the same across retries of one delivery; deduplicate with it. */
  deliveryId: string | null;
  event: WebhookEvent;
}

/**
 * The secret, or the secrets, a receiver accepts: exactly as the service returned them (64
 * hexadecimal characters). During a rotation give both, `[oldSecret, newSecret]`: a delivery
 * verifies when any of them signed it.
 */
export type WebhookSecrets = string | readonly string[];

const V1_SIGNATURE = /^sha256=([0-9a-fA-F]{64})$/;
const encoder = new TextEncoder();

function header(headers: HeaderSource, name: string): string | undefined {
  if (typeof (headers as HeaderGetter).get === 'function') return (headers as HeaderGetter).get(name) ?? undefined;
  const record = headers as Record<string, string | string[] | undefined>;
  const value = record[name] ?? Object.entries(record).find(([key]) => key.toLowerCase() === name)?.[1];
  return Array.isArray(value) ? value[0] : value;
}

/** A copy of the body's bytes (a copy, so that Web Crypto gets a plain ArrayBuffer-backed array). */
function bodyBytes(rawBody: RawBody): Uint8Array<ArrayBuffer> {
  if (typeof rawBody === 'string') return encoder.encode(rawBody);
  // ArrayBuffer.isView and the tag work across realms (a Buffer made by another context, a test runner's sandbox).
  if (ArrayBuffer.isView(rawBody)) {
    const copy = new Uint8Array(rawBody.byteLength);
    copy.set(new Uint8Array(rawBody.buffer, rawBody.byteOffset, rawBody.byteLength));
    return copy;
  }
  if (Object.prototype.toString.call(rawBody) === '[object ArrayBuffer]') return new Uint8Array((rawBody as ArrayBuffer).slice(0));
  throw new WebhookVerificationError('invalid_body', 'pass the raw body (the bytes as received, or the same text), not parsed JSON');
}

/** The secrets given, refusing none or a blank one. */
function secretList(secrets: WebhookSecrets): readonly string[] {
  const list = typeof secrets === 'string' ? [secrets] : Array.isArray(secrets) ? (secrets as readonly unknown[]) : [];
  if (list.length === 0 || list.some((secret) => typeof secret !== 'string' || secret.length === 0)) {
    throw new TypeError('secret is required: a non-empty string, or a non-empty list of them');
  }
  return list as readonly string[];
}

function subtleCrypto(): SubtleCrypto {
  const subtle = (globalThis as { crypto?: { subtle?: SubtleCrypto } }).crypto?.subtle;
  if (!subtle) {
    throw new Error('Web Crypto (crypto.subtle) is not available here: webhook verification needs Node 20 or later, Deno, Bun, a worker runtime, or a page in a secure context (https or localhost)');
  }
  return subtle;
}

/** HMAC-SHA256 of each message, keyed with the secret's bytes exactly as returned (the same key as whsec_ + base64 of the secret). */
async function hmacs(secret: string, messages: readonly Uint8Array<ArrayBuffer>[]): Promise<Uint8Array[]> {
  const subtle = subtleCrypto();
  const key = await subtle.importKey('raw', encoder.encode(secret), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
  return Promise.all(messages.map(async (message) => new Uint8Array(await subtle.sign('HMAC', key, message))));
}

/** Equal bytes, in time that depends only on the length (which is public: 32 bytes for every signature here). */
function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let difference = 0;
  for (let i = 0; i < a.length; i++) difference |= a[i]! ^ b[i]!;
  return difference === 0;
}

function hexBytes(hex: string): Uint8Array {
  const bytes = new Uint8Array(hex.length / 2);
  for (let i = 0; i < bytes.length; i++) bytes[i] = Number.parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  return bytes;
}

/** The bytes of a base64 signature; undefined when it is not base64 (it then matches nothing). */
function base64Bytes(text: string): Uint8Array | undefined {
  let binary: string;
  try {
    binary = atob(text);
  } catch {
    return undefined;
  }
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array<ArrayBuffer> {
  const all = new Uint8Array(a.length + b.length);
  all.set(a, 0);
  all.set(b, a.length);
  return all;
}

/**
 * Verifies a delivery and returns its event and delivery id. Checks `X-Service-Signature`
 * (HMAC-SHA256 of the raw bytes keyed with the secret as returned) in constant time, and the
 * Standard Webhooks headers (`webhook-id`, `webhook-timestamp`, `webhook-signature`) with the
 * timestamp's tolerance; without them the delivery is refused unless `requireTimestamp: false`.
 * Rejects with a WebhookVerificationError and its `reason` otherwise.
 *
 * `secret` may be a list: each signature verifies when any secret of the list made it. During a
 * rotation's overlap `webhook-signature` carries one signature per valid secret (new first) and
 * `X-Service-Signature` is made with the new secret only, so a receiver holding
 * `[oldSecret, newSecret]` accepts every attempt from the rotation on; drop the old one after
 * `previousSecretExpiresAt`.
 *
 * Asynchronous because Web Crypto is. Runs wherever `crypto.subtle` exists: Node 20+, Deno, Bun,
 * worker runtimes, browsers (in a secure context).
 */
export async function verifyWebhookDelivery(rawBody: RawBody, headers: HeaderSource, secret: WebhookSecrets, options: VerifyOptions = {}): Promise<VerifiedDelivery> {
  const secrets = secretList(secret);
  const body = bodyBytes(rawBody);
  const v1 = header(headers, 'x-service-signature')?.trim();
  if (!v1) throw new WebhookVerificationError('missing_signature', 'no X-Service-Signature header');
  const match = V1_SIGNATURE.exec(v1);

  const deliveryId = header(headers, 'x-service-delivery-id') ?? null;
  const id = header(headers, 'webhook-id');
  const timestamp = header(headers, 'webhook-timestamp')?.trim();
  const signatures = header(headers, 'webhook-signature');
  const standard = timestamp === undefined || signatures === undefined || id === undefined ? undefined : { id, timestamp, signatures };
  // The Standard Webhooks message: `${id}.${timestamp}.` followed by the raw body.
  const standardMessage = standard ? concat(encoder.encode(`${standard.id}.${standard.timestamp}.`), body) : undefined;
  // Every secret is tried for every check, so the time taken does not tell which one signed.
  const macs = await Promise.all(secrets.map((key) => hmacs(key, standardMessage ? [body, standardMessage] : [body])));

  const given = match ? hexBytes(match[1]!.toLowerCase()) : undefined;
  if (!given || !anyMatches(macs.map(([v1Mac]) => sameBytes(given, v1Mac!)))) {
    throw new WebhookVerificationError('invalid_signature', 'X-Service-Signature does not match the body');
  }

  if (!standard) {
    if (options.requireTimestamp ?? true) throw new WebhookVerificationError('missing_timestamp', 'no Standard Webhooks headers (webhook-id, webhook-timestamp, webhook-signature)');
  } else {
    checkTimestamp(standard.timestamp, options);
    // One signature per secret the sender holds, space-separated; each `v1,<base64>`.
    const offered = standard.signatures
      .split(' ')
      .filter((entry) => entry.startsWith('v1,'))
      .map((entry) => base64Bytes(entry.slice(3)))
      .filter((bytes): bytes is Uint8Array => bytes !== undefined);
    const ok = anyMatches(macs.map(([, expected]) => anyMatches(offered.map((signature) => sameBytes(signature, expected!)))));
    if (!ok) throw new WebhookVerificationError('invalid_signature', 'webhook-signature does not match the body');
    if (deliveryId !== null && deliveryId !== standard.id) throw new WebhookVerificationError('id_mismatch', 'webhook-id differs from X-Service-Delivery-Id');
  }
  return { deliveryId: deliveryId ?? id ?? null, event: parseEvent(body) };
}

/** {@link verifyWebhookDelivery}, resolving to the event alone. */
export async function verifyWebhook(rawBody: RawBody, headers: HeaderSource, secret: WebhookSecrets, options: VerifyOptions = {}): Promise<WebhookEvent> {
  return (await verifyWebhookDelivery(rawBody, headers, secret, options)).event;
}

/**
 * Verifies a fetch `Request` (Cloudflare Workers, Deno, Bun, Next.js route handlers, Hono…):
 * reads its body once, as bytes, and verifies it as {@link verifyWebhookDelivery} does. The body
 * cannot be read again afterwards; the verified event is in the result.
 */
export async function verifyWebhookRequest(request: WebhookRequest, secret: WebhookSecrets, options: VerifyOptions = {}): Promise<VerifiedDelivery> {
  secretList(secret); // a programming error is reported before the body is consumed
  return verifyWebhookDelivery(await request.arrayBuffer(), request.headers, secret, options);
}

/** True when any check passed; every check was made, none skipped. */
function anyMatches(results: readonly boolean[]): boolean {
  let ok = false;
  for (const result of results) ok = result || ok;
  return ok;
}

function checkTimestamp(timestamp: string, options: VerifyOptions): void {
  if (!/^\d{1,12}$/.test(timestamp)) throw new WebhookVerificationError('invalid_timestamp', 'webhook-timestamp is not Unix seconds');
  const sentAt = Number(timestamp);
  const now = Math.floor((options.now?.() ?? new Date()).getTime() / 1000);
  const tolerance = options.toleranceSeconds ?? 300;
  if (sentAt < now - tolerance) throw new WebhookVerificationError('timestamp_too_old', `webhook-timestamp is more than ${tolerance} s old`);
  if (sentAt > now + tolerance) throw new WebhookVerificationError('timestamp_too_new', `webhook-timestamp is more than ${tolerance} s in the future`);
}

function parseEvent(body: Uint8Array): WebhookEvent {
  let parsed: unknown;
  try {
    parsed = JSON.parse(new TextDecoder().decode(body));
  } catch {
    throw new WebhookVerificationError('invalid_body', 'the body is not JSON');
  }
  const event = parsed as Partial<WebhookEvent> | null;
  if (!event || typeof event !== 'object' || typeof event.event !== 'string' || typeof event.timestamp !== 'string' || !event.data || typeof event.data !== 'object') {
    throw new WebhookVerificationError('invalid_body', 'the body is not an event envelope { event, timestamp, data }');
  }
  return event as WebhookEvent;
}
