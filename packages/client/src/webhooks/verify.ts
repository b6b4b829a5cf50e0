// The one webhook verifier of the library. It uses only what every runtime that receives HTTP has
// (Web Crypto's `crypto.subtle`, `TextEncoder`, `atob`, `Uint8Array`): no Node built-in, no Buffer,
// so the same code runs in Node 20/22/24, Deno, Bun and Cloudflare Workers (and loads in a browser,
// which only shows it needs nothing of Node: a webhook secret belongs on a server). The Node
// handler (handler.ts) is built on it.
import { concatBytes } from '../bytes.js';
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

/** What {@link verifyWebhookRequest} reads of a fetch `Request`'s `body` stream. */
export interface WebhookBodyStream {
  getReader(): {
    read(): Promise<{ done: boolean; value?: Uint8Array | undefined }>;
    cancel(reason?: unknown): Promise<void>;
  };
}

/**
 * What {@link verifyWebhookRequest} needs of a fetch `Request`: its headers and one read of its
 * body, from its `body` stream when it has one (read only up to `maxBodyBytes`), otherwise with
 * `arrayBuffer()`.
 */
export interface WebhookRequest {
  readonly headers: HeaderGetter;
  readonly body?: WebhookBodyStream | null;
  arrayBuffer(): Promise<ArrayBuffer>;
}

export interface VerifyOptions {
  /**
   * How far `webhook-timestamp` may be from now, in seconds, either way (replay protection).
   * Default 300, as the Standard Webhooks libraries. Anything but a finite number of 0 or more
   * (`NaN` from an unset environment variable, say) is a TypeError, never "no limit".
   */
  toleranceSeconds?: number;
  /**
   * Refuse deliveries without the Standard Webhooks headers (`webhook-id`, `webhook-timestamp`,
   * `webhook-signature`). Default true: every attempt the service sends carries them, and the v1
   * `X-Service-Signature` alone covers no time, so a captured delivery stripped of them could be
   * replayed forever. Set false only for a sender that predates them.
   */
  requireTimestamp?: boolean;
  /** The clock, for tests. It must return a valid Date: anything else is a TypeError. */
  now?: () => Date;
}

/** {@link verifyWebhookRequest}'s options: those of every verifier, and a bound on the body it reads. */
export interface VerifyRequestOptions extends VerifyOptions {
  /**
   * The largest body read, in bytes: a Request declaring more (`Content-Length`) is refused before
   * its body is read, and a stream is read no further than this (`body_too_large`). Default 1 MiB;
   * the service's events are well under 1 KiB.
   */
  maxBodyBytes?: number;
}

/** What a verified delivery carries. */
export interface VerifiedDelivery {
  /** `X-Service-Delivery-Id`: the same across retries of one delivery; deduplicate with it. */
  deliveryId: string | null;
  event: WebhookEvent;
}

/**
 * The secret, or the secrets, a receiver accepts: exactly as the service returned them (64
 * hexadecimal characters), or in their Standard Webhooks form (`whsec_…`, the
 * `standardWebhooksSecret` returned beside each), which is the same key written another way.
 * During a rotation give both, `[oldSecret, newSecret]`: a delivery verifies when any of them
 * signed it.
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

const STANDARD_PREFIX = 'whsec_';
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** What a wrong secret is, in words, without ever showing a secret. */
function describeSecret(value: unknown, inList: boolean): string {
  const what = value === undefined ? 'undefined' : value === null ? 'null' : value === '' ? 'an empty string' : Array.isArray(value) ? 'a list' : `a ${typeof value}`;
  return `got ${what}${inList ? ' in the list' : ''}`;
}

/**
 * The HMAC key of each secret given: the secret's characters as UTF-8, exactly as returned; for a
 * `whsec_` secret, the bytes its base64 spells, which for the service's secrets are those same
 * characters (the service writes its Standard Webhooks secret as `whsec_` + base64 of the secret).
 * A hexadecimal secret never starts with `whsec_`, so the two forms cannot be mistaken for each
 * other. Refuses none, a blank one, or a `whsec_` one that is not followed by base64 (TypeError),
 * before anything is read or computed: a programming error, never a failed delivery.
 */
export function secretKeys(secrets: WebhookSecrets): Uint8Array<ArrayBuffer>[] {
  const required = (got: string) => new TypeError(`secret is required: the subscription's secret exactly as the API returned it (64 hexadecimal characters), or a non-empty list of them; ${got}`);
  const list: readonly unknown[] = typeof secrets === 'string' ? [secrets] : Array.isArray(secrets) ? (secrets as readonly unknown[]) : [];
  if (!Array.isArray(secrets) && typeof secrets !== 'string') throw required(describeSecret(secrets, false));
  if (list.length === 0) throw required(Array.isArray(secrets) ? 'got an empty list' : describeSecret(secrets, false));
  return list.map((secret) => {
    if (typeof secret !== 'string' || secret.length === 0) throw required(describeSecret(secret, Array.isArray(secrets)));
    if (!secret.startsWith(STANDARD_PREFIX)) return encoder.encode(secret);
    const encoded = secret.slice(STANDARD_PREFIX.length);
    const bytes = encoded.length > 0 && BASE64.test(encoded) ? base64Bytes(encoded) : undefined;
    if (!bytes || bytes.length === 0) {
      throw new TypeError('secret starts with whsec_ but is not followed by base64: pass the secret exactly as the API returned it (64 hexadecimal characters), or its standardWebhooksSecret unchanged');
    }
    return bytes;
  });
}

/** What a wrong option was, in words (options hold no secret). */
function describeValue(value: unknown): string {
  return typeof value === 'string' ? `the string ${JSON.stringify(value)}` : typeof value === 'number' || value === null || value === undefined ? String(value) : `a ${typeof value}`;
}

/**
 * A number option that must be a whole number of 1 or more (or Infinity, no bound): refuses NaN, 0,
 * negatives and fractions, so a bad value never switches its check off.
 */
export function wholeNumberOption(name: string, value: unknown, fallback: number, unit: string): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !(value === Number.POSITIVE_INFINITY || (Number.isSafeInteger(value) && value >= 1))) {
    throw new TypeError(`${name} must be a whole number${unit ? ` of ${unit}` : ''}, 1 or more; got ${describeValue(value)}`);
  }
  return value;
}

/** A number option that must be finite and 0 or more. */
export function finiteOption(name: string, value: unknown, fallback: number, unit: string): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) throw new TypeError(`${name} must be a finite number of ${unit}, 0 or more; got ${describeValue(value)}`);
  return value;
}

/**
 * The verifier's options, checked: a tolerance that is not a finite number of 0 or more, a clock
 * that is not a function, or a requireTimestamp that is not a boolean is a TypeError. (NaN would
 * make both timestamp comparisons false and accept a capture of any age.)
 */
export function checkOptions(options: VerifyOptions): { toleranceSeconds: number; requireTimestamp: boolean; now: () => Date } {
  if (options === null || typeof options !== 'object') throw new TypeError('options must be an object');
  const toleranceSeconds = finiteOption('toleranceSeconds', options.toleranceSeconds, 300, 'seconds');
  const requireTimestamp = options.requireTimestamp ?? true;
  if (typeof requireTimestamp !== 'boolean') throw new TypeError(`requireTimestamp must be true or false; got ${describeValue(requireTimestamp)}`);
  const now = options.now ?? (() => new Date());
  if (typeof now !== 'function') throw new TypeError('now must be a function returning a Date');
  return { toleranceSeconds, requireTimestamp, now };
}

/** Unix seconds of the clock, refusing anything but a valid Date (an invalid one would disable the tolerance). */
function clockSeconds(now: () => Date): number {
  const date: unknown = now();
  const time = Object.prototype.toString.call(date) === '[object Date]' ? (date as Date).getTime() : Number.NaN;
  if (Number.isNaN(time)) throw new TypeError(`now() must return a valid Date; it returned ${date instanceof Date || Object.prototype.toString.call(date) === '[object Date]' ? 'an invalid Date' : describeValue(date)}`);
  return Math.floor(time / 1000);
}

function subtleCrypto(): SubtleCrypto {
  const subtle = (globalThis as { crypto?: { subtle?: SubtleCrypto } }).crypto?.subtle;
  if (!subtle) {
    throw new Error('Web Crypto (crypto.subtle) is not available here: webhook verification needs Node 20 or later, Deno, Bun or a worker runtime');
  }
  return subtle;
}

/** HMAC-SHA256 of each message, keyed with a secret's key (see secretKeys). */
async function hmacs(secret: Uint8Array<ArrayBuffer>, messages: readonly Uint8Array<ArrayBuffer>[]): Promise<Uint8Array[]> {
  const subtle = subtleCrypto();
  const key = await subtle.importKey('raw', secret, { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
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
function base64Bytes(text: string): Uint8Array<ArrayBuffer> | undefined {
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

/**
 * The promise a verifier returns, made to fail loudly when read as the result it resolves to: code
 * written for the synchronous verifier of 0.1.0 (`const event = verifyWebhook(…)`, then
 * `event.data`) gets a TypeError that says to await it, instead of undefined. The properties are
 * not enumerable, so the promise looks like any other to everything that does not read them.
 */
function mustBeAwaited<T>(promise: Promise<T>, name: string, properties: readonly string[]): Promise<T> {
  for (const property of properties) {
    Object.defineProperty(promise, property, {
      configurable: true,
      enumerable: false,
      get() {
        throw new TypeError(`${name}() returns a promise since version 0.2.0: read .${property} of what it resolves to (\`const result = await ${name}(…)\`)`);
      },
    });
  }
  return promise;
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
 * Asynchronous (since 0.2.0) because Web Crypto is: always `await` it. Runs wherever
 * `crypto.subtle` exists: Node 20+, Deno, Bun, worker runtimes. Verify on a server or at the edge:
 * whoever holds the secret can sign deliveries.
 */
export function verifyWebhookDelivery(rawBody: RawBody, headers: HeaderSource, secret: WebhookSecrets, options: VerifyOptions = {}): Promise<VerifiedDelivery> {
  return mustBeAwaited(verifyDelivery(rawBody, headers, secret, options), 'verifyWebhookDelivery', ['deliveryId', 'event']);
}

async function verifyDelivery(rawBody: RawBody, headers: HeaderSource, secret: WebhookSecrets, options: VerifyOptions): Promise<VerifiedDelivery> {
  const secrets = secretKeys(secret);
  const { toleranceSeconds, requireTimestamp, now } = checkOptions(options);
  const nowSeconds = clockSeconds(now);
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
  const standardMessage = standard ? concatBytes([encoder.encode(`${standard.id}.${standard.timestamp}.`), body]) : undefined;
  // Every secret is tried for every check, so the time taken does not tell which one signed.
  const macs = await Promise.all(secrets.map((key) => hmacs(key, standardMessage ? [body, standardMessage] : [body])));

  const given = match ? hexBytes(match[1]!.toLowerCase()) : undefined;
  if (!given || !anyMatches(macs.map(([v1Mac]) => sameBytes(given, v1Mac!)))) {
    throw new WebhookVerificationError('invalid_signature', 'X-Service-Signature does not match the body');
  }

  if (!standard) {
    if (requireTimestamp) throw new WebhookVerificationError('missing_timestamp', 'no Standard Webhooks headers (webhook-id, webhook-timestamp, webhook-signature)');
  } else {
    checkTimestamp(standard.timestamp, nowSeconds, toleranceSeconds);
    // One signature per secret the sender holds, space-separated; each `v1,<base64>`.
    const offered = standard.signatures
      .split(' ')
      .filter((entry) => entry.startsWith('v1,'))
      .map((entry) => base64Bytes(entry.slice(3)))
      .filter((bytes): bytes is Uint8Array<ArrayBuffer> => bytes !== undefined);
    const ok = anyMatches(macs.map(([, expected]) => anyMatches(offered.map((signature) => sameBytes(signature, expected!)))));
    if (!ok) throw new WebhookVerificationError('invalid_signature', 'webhook-signature does not match the body');
    if (deliveryId !== null && deliveryId !== standard.id) throw new WebhookVerificationError('id_mismatch', 'webhook-id differs from X-Service-Delivery-Id');
  }
  return { deliveryId: deliveryId ?? id ?? null, event: parseEvent(body) };
}

/** {@link verifyWebhookDelivery}, resolving to the event alone. */
export function verifyWebhook(rawBody: RawBody, headers: HeaderSource, secret: WebhookSecrets, options: VerifyOptions = {}): Promise<WebhookEvent> {
  return mustBeAwaited(
    verifyDelivery(rawBody, headers, secret, options).then(({ event }) => event),
    'verifyWebhook',
    ['event', 'timestamp', 'data'],
  );
}

/**
 * Verifies a fetch `Request` (Cloudflare Workers, Deno, Bun, Next.js route handlers, Hono…):
 * reads its body once, as bytes, and verifies it as {@link verifyWebhookDelivery} does. The body
 * cannot be read again afterwards; the verified event is in the result. A body over
 * `maxBodyBytes` (1 MiB by default) is refused (`body_too_large`) without being read whole.
 */
export function verifyWebhookRequest(request: WebhookRequest, secret: WebhookSecrets, options: VerifyRequestOptions = {}): Promise<VerifiedDelivery> {
  return mustBeAwaited(verifyRequest(request, secret, options), 'verifyWebhookRequest', ['deliveryId', 'event']);
}

async function verifyRequest(request: WebhookRequest, secret: WebhookSecrets, options: VerifyRequestOptions): Promise<VerifiedDelivery> {
  // Programming errors are reported before the body is consumed.
  secretKeys(secret);
  checkOptions(options);
  const maxBodyBytes = wholeNumberOption('maxBodyBytes', options.maxBodyBytes, 1024 * 1024, 'bytes');
  return verifyDelivery(await readBody(request, maxBodyBytes), request.headers, secret, options);
}

function bodyTooLarge(maxBodyBytes: number): WebhookVerificationError {
  return new WebhookVerificationError('body_too_large', `the body is larger than maxBodyBytes (${maxBodyBytes} bytes)`);
}

/** A Request's body, at most maxBodyBytes of it: refused by its Content-Length first, then as it streams in. */
async function readBody(request: WebhookRequest, maxBodyBytes: number): Promise<Uint8Array<ArrayBuffer>> {
  const declared = request.headers.get('content-length')?.trim();
  if (declared && /^\d+$/.test(declared) && Number(declared) > maxBodyBytes) throw bodyTooLarge(maxBodyBytes);
  const stream = request.body;
  if (stream === undefined || stream === null || typeof stream.getReader !== 'function') {
    const whole = await request.arrayBuffer();
    if (whole.byteLength > maxBodyBytes) throw bodyTooLarge(maxBodyBytes);
    return new Uint8Array(whole);
  }
  const reader = stream.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (!ArrayBuffer.isView(value)) {
      void reader.cancel().catch(() => undefined);
      throw new TypeError('the request body stream gave something other than bytes');
    }
    size += value.byteLength;
    if (size > maxBodyBytes) {
      // Stop the sender: nothing more of this body is read.
      void reader.cancel(bodyTooLarge(maxBodyBytes)).catch(() => undefined);
      throw bodyTooLarge(maxBodyBytes);
    }
    chunks.push(value);
  }
  return concatBytes(chunks);
}

/** True when any check passed; every check was made, none skipped. */
function anyMatches(results: readonly boolean[]): boolean {
  let ok = false;
  for (const result of results) ok = result || ok;
  return ok;
}

function checkTimestamp(timestamp: string, now: number, tolerance: number): void {
  if (!/^\d{1,12}$/.test(timestamp)) throw new WebhookVerificationError('invalid_timestamp', 'webhook-timestamp is not Unix seconds');
  const sentAt = Number(timestamp);
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
