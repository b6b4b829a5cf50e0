import { concatBytes } from './bytes.js';
import { errorFor, SiteVisibilityError } from './errors.js';

/**
 * Why a request is being tried again: a 429, a 5xx, no answer (a refused or dropped connection,
 * a timeout), or a 409 `idempotency_key_in_use` (the first try of this call is still being answered).
 */
export type RetryReason = 'rate_limited' | 'server_error' | 'network_error' | 'idempotency_key_in_use';

/** Passed to `onRetry` before each wait, so callers can log, count or cancel retries. */
export interface RetryInfo {
  method: string;
  path: string;
  /** 1 for the first retry, 2 for the second… */
  retry: number;
  /** How long the client waits before sending again. */
  delayMs: number;
  reason: RetryReason;
  /** What the previous try ended with. */
  error: SiteVisibilityError;
}

export interface TransportOptions {
  /** The `svc_live_…` key. Keep it server-side. */
  apiKey: string;
  /** Where the service runs, e.g. `https://api.example.com`; a trailing `/api/v1` is accepted too. */
  baseUrl: string;
  /**
   * Retries of a call after a 5xx, a network failure or a timeout, and after a 409
   * `idempotency_key_in_use`. Every method is retried: GET and DELETE because they are safe to
   * repeat, POST and PATCH because each carries an Idempotency-Key. Default 3.
   */
  maxRetries?: number;
  /** First backoff step; each retry doubles it, with full jitter. Default 500 ms. */
  retryBaseDelayMs?: number;
  /** The longest backoff step. Default 20 s. */
  retryMaxDelayMs?: number;
  /**
   * On 429: `wait` sleeps for `Retry-After` (60 s when the answer gives none) and sends again, at most
   * `maxRateLimitWaits` times; `throw` reports the 429 at once. Default `wait`.
   */
  onRateLimit?: 'wait' | 'throw';
  /** Default 2. */
  maxRateLimitWaits?: number;
  /**
   * The longest `Retry-After` the client waits, in seconds (default 60, what the API asks for; at most
   * 2,147,483). A 429 or 5xx asking for longer fails the call at once with its error, whose
   * `retryAfterSeconds` says how long the service asked for, instead of sleeping that long.
   */
  maxRetryAfterSeconds?: number;
  /** The largest answer the client reads, in bytes (default 10 MiB); a larger one fails as `invalid_response`. */
  maxResponseBytes?: number;
  /** Bound on one try, from sending to the whole answer read. Default 30 s. */
  timeoutMs?: number;
  /** Called before every retry; throw from it, or abort the request's signal, to stop retrying. */
  onRetry?: (info: RetryInfo) => void;
  /** A fetch of your own (instrumentation, proxies). Default: the global fetch. */
  fetch?: typeof fetch;
  /** Sent as User-Agent. */
  userAgent?: string;
}

export interface RequestOptions {
  /** Cancels the request and any wait between retries; the promise rejects with the signal's reason. */
  signal?: AbortSignal;
  /**
   * POST and PATCH only: the `Idempotency-Key` this call sends on every try, 1–255 printable
   * ASCII characters. Default: a random UUID per call. Give your own to make a call safe to
   * repeat across processes (a job that restarts): the same key and body within 24 hours get
   * the first answer again and change nothing; the same key with another body is refused
   * (`idempotency_key_reused`).
   */
  idempotencyKey?: string;
}

/** Connection failures that prove the request never reached the server: safe to retry any method. */
const NOT_SENT_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN']);
/** Methods that change nothing when repeated. */
const IDEMPOTENT = new Set(['GET', 'HEAD', 'DELETE']);
/** Methods that carry an Idempotency-Key, which makes a repeat of the same call change nothing. */
const KEYED = new Set(['POST', 'PATCH']);
/** The API's rule for an Idempotency-Key (its OpenAPI document, parameter IdempotencyKey). */
const IDEMPOTENCY_KEY_SHAPE = /^[\x20-\x7E]{1,255}$/;
const DEFAULT_RETRY_AFTER_SECONDS = 60;
/** The longest delay setTimeout takes (2^31 − 1 ms); longer ones fire at once. */
const MAX_TIMER_SECONDS = Math.floor((2 ** 31 - 1) / 1000);
const DEFAULT_MAX_RESPONSE_BYTES = 10 * 1024 * 1024;

interface Envelope {
  data?: unknown;
  error?: { code?: unknown; message?: unknown };
}

/**
 * Sends requests the way the API asks a good client to: waits out 429s, retries 5xx, network
 * failures and timeouts with exponential backoff and jitter, and turns every failure into one
 * SiteVisibilityError. A POST or PATCH carries one `Idempotency-Key` for all its tries, so the
 * API answers a retry of a call that already took effect with that first answer instead of
 * acting twice; while that first try is still being answered (409 `idempotency_key_in_use`) the
 * retry waits a backoff step and tries again.
 */
export class Transport {
  private readonly base: string;
  private readonly fetchImpl: typeof fetch;

  constructor(private readonly options: TransportOptions) {
    if (typeof options.apiKey !== 'string' || options.apiKey.trim() === '') throw new TypeError('apiKey is required');
    let url: URL;
    try {
      url = new URL(options.baseUrl);
    } catch {
      throw new TypeError(`baseUrl is not a URL: ${String(options.baseUrl)}`);
    }
    this.base = url.toString().replace(/\/+$/, '').replace(/\/api\/v1$/, '');
    this.fetchImpl = options.fetch ?? globalThis.fetch;
    const cap = options.maxRetryAfterSeconds;
    if (cap !== undefined && (!Number.isInteger(cap) || cap < 0 || cap > MAX_TIMER_SECONDS)) {
      throw new TypeError(`maxRetryAfterSeconds must be a whole number of seconds from 0 to ${MAX_TIMER_SECONDS}`);
    }
    const bytes = options.maxResponseBytes;
    if (bytes !== undefined && (!Number.isInteger(bytes) || bytes < 1)) throw new TypeError('maxResponseBytes must be a positive whole number');
  }

  /** Performs one API call and returns the `data` member of the envelope. */
  async request<T>(method: string, path: string, init: { query?: Record<string, string | number | undefined>; body?: unknown } & RequestOptions = {}): Promise<T> {
    const url = new URL(`${this.base}/api/v1${path}`);
    for (const [name, value] of Object.entries(init.query ?? {})) {
      if (value !== undefined) url.searchParams.set(name, String(value));
    }
    // Fixed for the whole call: every try sends the same key and the same body bytes, which is
    // what makes the API recognise a retry.
    const idempotencyKey = KEYED.has(method) ? (init.idempotencyKey ?? globalThis.crypto.randomUUID()) : undefined;
    if (idempotencyKey !== undefined && (typeof idempotencyKey !== 'string' || !IDEMPOTENCY_KEY_SHAPE.test(idempotencyKey))) {
      throw new TypeError('idempotencyKey must be 1 to 255 printable ASCII characters (a UUID, say)');
    }
    const tryOnce = { body: init.body === undefined ? undefined : JSON.stringify(init.body), idempotencyKey, signal: init.signal };
    const maxRetries = this.options.maxRetries ?? 3;
    const maxRateLimitWaits = this.options.maxRateLimitWaits ?? 2;
    let retries = 0;
    let rateLimitWaits = 0;
    for (;;) {
      init.signal?.throwIfAborted();
      let error: SiteVisibilityError;
      let sent: boolean;
      try {
        return (await this.once(method, url, tryOnce)) as T;
      } catch (caught) {
        if (init.signal?.aborted) throw init.signal.reason;
        if (!(caught instanceof SiteVisibilityError)) throw caught;
        error = caught;
        sent = !(error.cause && NOT_SENT_CODES.has(errorCode(error.cause) ?? ''));
      }
      const keyInUse = idempotencyKey !== undefined && error.code === 'idempotency_key_in_use';
      let reason: RetryReason;
      let delayMs: number;
      if (error.code === 'rate_limited') {
        if ((this.options.onRateLimit ?? 'wait') === 'throw' || rateLimitWaits >= maxRateLimitWaits) throw error;
        rateLimitWaits += 1;
        reason = 'rate_limited';
        delayMs = (error.retryAfterSeconds ?? DEFAULT_RETRY_AFTER_SECONDS) * 1000;
      } else if ((error.retryable || keyInUse) && (IDEMPOTENT.has(method) || idempotencyKey !== undefined || !sent) && retries < maxRetries) {
        retries += 1;
        reason = keyInUse ? 'idempotency_key_in_use' : error.status === 0 ? 'network_error' : 'server_error';
        delayMs = Math.max(this.backoffMs(retries), (error.retryAfterSeconds ?? 0) * 1000);
      } else {
        throw error;
      }
      const maxWaitSeconds = this.options.maxRetryAfterSeconds ?? DEFAULT_RETRY_AFTER_SECONDS;
      if (error.retryAfterSeconds !== null && error.retryAfterSeconds > maxWaitSeconds) {
        throw errorFor({
          code: error.code,
          status: error.status,
          message: `${error.message} (the service asked to wait ${error.retryAfterSeconds} s, longer than maxRetryAfterSeconds, ${maxWaitSeconds} s)`,
          requestId: error.requestId,
          retryAfterSeconds: error.retryAfterSeconds,
        });
      }
      this.options.onRetry?.({ method, path, retry: retries + rateLimitWaits, delayMs, reason, error });
      await sleep(delayMs, init.signal);
    }
  }

  /** Full jitter (AWS's "exponential backoff and jitter"): uniform in [0, min(max, base·2^(n-1))]. */
  private backoffMs(retry: number): number {
    const base = this.options.retryBaseDelayMs ?? 500;
    const max = this.options.retryMaxDelayMs ?? 20_000;
    return Math.round(Math.random() * Math.min(max, base * 2 ** (retry - 1)));
  }

  /** One try: `body` is the JSON text to send, `idempotencyKey` the header of a POST or PATCH. */
  private async once(method: string, url: URL, init: { body: string | undefined; idempotencyKey: string | undefined; signal: AbortSignal | undefined }): Promise<unknown> {
    const timeoutMs = this.options.timeoutMs ?? 30_000;
    const timeout = AbortSignal.timeout(timeoutMs);
    const signal = init.signal ? AbortSignal.any([init.signal, timeout]) : timeout;
    const headers: Record<string, string> = {
      authorization: `Bearer ${this.options.apiKey}`,
      accept: 'application/json',
      'user-agent': this.options.userAgent ?? '@site-visibility/client',
    };
    if (init.body !== undefined) headers['content-type'] = 'application/json';
    if (init.idempotencyKey !== undefined) headers['idempotency-key'] = init.idempotencyKey;
    let response: Response;
    let text: string;
    // Called on its own, not as this.fetchImpl(…): browsers' and worker runtimes' fetch refuses another `this`.
    const fetchImpl = this.fetchImpl;
    try {
      response = await fetchImpl(url, {
        method,
        headers,
        body: init.body,
        redirect: 'error',
        signal,
      });
      text = await readBounded(response, this.options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES);
    } catch (cause) {
      if (cause instanceof SiteVisibilityError) throw cause;
      if (init.signal?.aborted) throw init.signal.reason;
      const timedOut = timeout.aborted;
      throw errorFor({
        code: 'network_error',
        status: 0,
        message: timedOut ? `no answer within ${timeoutMs} ms from ${method} ${url.pathname}` : `request failed: ${describeCause(cause)}`,
        cause,
      });
    }
    const requestId = response.headers.get('request-id');
    const retryAfterSeconds = parseRetryAfter(response.headers.get('retry-after'));
    if (response.status >= 500) {
      throw errorFor({
        code: 'server_error',
        status: response.status,
        message: `the service answered ${response.status}; retry later`,
        requestId,
        retryAfterSeconds,
      });
    }
    let envelope: Envelope | undefined;
    try {
      envelope = JSON.parse(text) as Envelope;
    } catch {
      envelope = undefined;
    }
    if (response.ok && envelope && typeof envelope === 'object' && 'data' in envelope) return envelope.data;
    const apiError = envelope?.error;
    if (!response.ok && apiError && typeof apiError.code === 'string') {
      throw errorFor({
        code: apiError.code,
        status: response.status,
        message: typeof apiError.message === 'string' ? apiError.message : apiError.code,
        requestId,
        retryAfterSeconds,
      });
    }
    throw errorFor({
      code: 'invalid_response',
      status: response.status,
      message: `unexpected answer to ${method} ${url.pathname}: HTTP ${response.status}`,
      requestId,
    });
  }
}

/** The answer's text, refusing one larger than `maxBytes` (announced or as it arrives) without reading the rest. */
async function readBounded(response: Response, maxBytes: number): Promise<string> {
  const tooLarge = () =>
    errorFor({
      code: 'invalid_response',
      status: response.status,
      message: `the answer is larger than maxResponseBytes (${maxBytes} bytes)`,
      requestId: response.headers.get('request-id'),
    });
  const announced = Number(response.headers.get('content-length') ?? NaN);
  if (announced > maxBytes) {
    await response.body?.cancel().catch(() => undefined);
    throw tooLarge();
  }
  if (!response.body) return '';
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > maxBytes) {
      await reader.cancel().catch(() => undefined);
      throw tooLarge();
    }
    chunks.push(value);
  }
  return new TextDecoder().decode(concatBytes(chunks));
}

function parseRetryAfter(value: string | null): number | null {
  if (value === null) return null;
  if (/^\d+$/.test(value.trim())) return Number(value.trim());
  const date = Date.parse(value);
  return Number.isNaN(date) ? null : Math.max(0, Math.ceil((date - Date.now()) / 1000));
}

function errorCode(error: unknown): string | undefined {
  const own = (error as { code?: unknown } | null)?.code;
  if (typeof own === 'string') return own;
  const cause = (error as { cause?: unknown } | null)?.cause;
  return cause && cause !== error ? errorCode(cause) : undefined;
}

function describeCause(error: unknown): string {
  const code = errorCode(error);
  const message = error instanceof Error ? error.message : String(error);
  return code ? `${code} (${message})` : message;
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
