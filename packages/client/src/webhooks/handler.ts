import { concatBytes } from '../bytes.js';
import { WebhookVerificationError } from '../errors.js';
import type { WebhookEvent } from './events.js';
import { checkOptions, finiteOption, secretKeys, verifyWebhookDelivery, wholeNumberOption, type VerifyOptions, type WebhookSecrets } from './verify.js';

export interface WebhookHandlerOptions extends VerifyOptions {
  /**
   * The subscription's secret, exactly as the create call returned it (or its `whsec_` form);
   * during a rotation both, `[oldSecret, newSecret]` (a delivery verifies when either signed it).
   * Checked when the handler is created: none (an unset environment variable), an empty one or a
   * malformed `whsec_` one throws a TypeError there and then.
   */
  secret: WebhookSecrets;
  /**
   * Called once per delivery id within the window, after the 2xx has been sent. Keep it quick
   * or hand the event to your own queue: the sender already has its answer and will not retry.
   */
  onEvent: (event: WebhookEvent, context: { deliveryId: string | null }) => void | Promise<void>;
  /** Errors thrown by `onEvent`. Default: console.error. */
  onError?: (error: unknown, context: { deliveryId: string | null }) => void;
  /**
   * How long a delivery id is remembered to drop repeats . Default 48 h: longer
   * than the whole retry schedule (1 min + 5 min + 30 min + 2 h + 12 h + 24 h).
   */
  dedupeWindowMs?: number;
  /** Bound on remembered ids (memory). Default 100,000; the oldest are forgotten first. */
  dedupeMaxEntries?: number;
  /** Bodies larger than this are refused with 413 without being read. Default 1 MiB. */
  maxBodyBytes?: number;
}

/**
 * What the handler uses of a request: Node's `http.IncomingMessage` or Express's `Request`.
 * Its body is read from `rawBody` or `body` when a body parser already read it as bytes or text,
 * otherwise from the request stream.
 */
export interface WebhookHandlerRequest extends AsyncIterable<unknown> {
  headers: Record<string, string | string[] | undefined>;
  body?: unknown;
  rawBody?: unknown;
}

/** What the handler uses of a response: Node's `http.ServerResponse` or Express's `Response`. */
export interface WebhookHandlerResponse {
  readonly headersSent: boolean;
  writeHead(statusCode: number, headers?: Record<string, string>): unknown;
  end(text?: string): unknown;
}

/**
 * An Express (or plain node:http) handler for webhook deliveries: reads the raw body itself
 * (mount it before any JSON body parser, or give it `express.raw()`'s Buffer), verifies the
 * signature and timestamp, drops repeats of a delivery id within a window, answers 204 at once
 * and then calls `onEvent`. A delivery that does not verify gets 400 and is never passed on.
 *
 * Its options are checked here, not on the first delivery: a missing or empty secret, a number
 * option that is not a number (NaN), or an `onEvent` that is not a function throws a TypeError
 * at once, so a misconfigured receiver fails when it starts instead of answering every delivery
 * 500 until the subscription is disabled.
 */
export function createWebhookHandler(options: WebhookHandlerOptions): (req: WebhookHandlerRequest, res: WebhookHandlerResponse) => void {
  if (options === null || typeof options !== 'object') throw new TypeError('createWebhookHandler takes an options object: { secret, onEvent }');
  secretKeys(options.secret);
  checkOptions(options);
  if (typeof options.onEvent !== 'function') throw new TypeError('onEvent must be a function');
  if (options.onError !== undefined && typeof options.onError !== 'function') throw new TypeError('onError must be a function');
  const windowMs = finiteOption('dedupeWindowMs', options.dedupeWindowMs, 48 * 60 * 60 * 1000, 'milliseconds');
  const maxEntries = wholeNumberOption('dedupeMaxEntries', options.dedupeMaxEntries, 100_000, '');
  const maxBodyBytes = wholeNumberOption('maxBodyBytes', options.maxBodyBytes, 1024 * 1024, 'bytes');
  const seen = new Map<string, number>();
  const onError = options.onError ?? ((error: unknown) => console.error('webhook handler: onEvent failed', error));

  function firstSighting(deliveryId: string, now: number): boolean {
    const expiry = seen.get(deliveryId);
    if (expiry !== undefined && expiry > now) return false;
    seen.delete(deliveryId);
    seen.set(deliveryId, now + windowMs);
    // Map keeps insertion order: the first entries are the oldest.
    for (const [id, expires] of seen) {
      if (seen.size <= maxEntries && expires > now) break;
      seen.delete(id);
    }
    return true;
  }

  return (req, res) => {
    void handle(req, res).catch((error: unknown) => {
      onError(error, { deliveryId: null });
      answer(res, 500, 'the webhook handler failed');
    });
  };

  async function handle(req: WebhookHandlerRequest, res: WebhookHandlerResponse): Promise<void> {
    let body;
    try {
      body = await readRawBody(req, maxBodyBytes);
    } catch (error) {
      onError(error, { deliveryId: null });
      answer(res, 400, 'could not read the request body');
      return;
    }
    if (body === 'too-large') {
      answer(res, 413, 'payload too large');
      return;
    }
    let verified;
    try {
      verified = await verifyWebhookDelivery(body, req.headers, options.secret, options);
    } catch (error) {
      if (error instanceof WebhookVerificationError) {
        answer(res, 400, `webhook verification failed: ${error.reason}`);
        return;
      }
      throw error;
    }
    const { deliveryId, event } = verified;
    const fresh = deliveryId === null || firstSighting(deliveryId, Date.now());
    answer(res, 204);
    if (!fresh) return;
    Promise.resolve()
      .then(() => options.onEvent(event, { deliveryId }))
      .catch((error: unknown) => onError(error, { deliveryId }));
  }
}

function answer(res: WebhookHandlerResponse, status: number, text?: string): void {
  if (res.headersSent) return;
  if (text === undefined) {
    res.writeHead(status);
    res.end();
    return;
  }
  res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8' });
  res.end(text);
}

const encoder = new TextEncoder();

/** The request's raw body: as a body parser left it (bytes or text), or read from the stream, at most maxBytes. */
async function readRawBody(req: WebhookHandlerRequest, maxBytes: number): Promise<Uint8Array | string | 'too-large'> {
  const given = req.rawBody ?? req.body;
  if (ArrayBuffer.isView(given)) return new Uint8Array(given.buffer, given.byteOffset, given.byteLength);
  if (typeof given === 'string') return given;
  if (given !== undefined && given !== null && typeof given === 'object' && Object.keys(given).length > 0) {
    throw new TypeError('the body was already parsed as JSON: mount the webhook handler before express.json(), or use express.raw({ type: "application/json" })');
  }
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > maxBytes) return 'too-large';
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of req) {
    const bytes = typeof chunk === 'string' ? encoder.encode(chunk) : ArrayBuffer.isView(chunk) ? new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength) : undefined;
    if (!bytes) throw new TypeError('the request stream gave something other than bytes or text');
    size += bytes.length;
    if (size > maxBytes) return 'too-large';
    chunks.push(bytes);
  }
  return concatBytes(chunks);
}
