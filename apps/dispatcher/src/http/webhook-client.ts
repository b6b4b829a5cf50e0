import type { Agent } from 'node:https';
import { createSecureContext, rootCertificates } from 'node:tls';
import got, { type Got } from 'got';
import { RESPONSE_EXCERPT_BYTES, signatureHeaders } from '@svc/core';
import { type ClaimedAttempt, type AttemptOutcome } from '@svc/core/dispatcher';
import { errorFailure, statusFailure, type FailureClass } from './attempt-failure.js';
import { BoundedAgent, liveSockets } from './bounded-agent.js';
import { createReceiverLookup, type ReceiverLookup } from './dns-resolver.js';
import { assertLiteralTargetAllowed } from './ssrf-guard.js';

/** Spec §6.2. */
export const USER_AGENT = 'Service-Webhooks/1.0';
/** How much of a response is read at all before the connection is dropped. */
export const RESPONSE_READ_LIMIT_BYTES = 64 * 1024;

/** An attempt's outcome, with the class /metrics counts a failure under (null when delivered). */
export interface SentAttempt extends AttemptOutcome {
  failure: FailureClass | null;
}

export interface WebhookClientOptions {
  timeoutMs: number;
  allowPrivateTargets: boolean;
  /** Extra trusted CAs beyond Node's (tests; operators use NODE_EXTRA_CA_CERTS). */
  ca?: string | Buffer | Array<string | Buffer>;
  /** At least the dispatcher's concurrency. */
  maxSocketsPerHost: number;
  /** Every socket of this client, in use or idle (WEBHOOK_MAX_SOCKETS); at least maxSocketsPerHost. */
  maxTotalSockets: number;
  /** Idle keep-alive sockets kept per host. */
  maxFreeSocketsPerHost: number;
  /** An idle keep-alive socket is closed after this long (WEBHOOK_IDLE_SOCKET_TIMEOUT_MS). */
  idleSocketTimeoutMs: number;
  dns: { timeoutMs: number; tries: number; servers: readonly string[] };
}

/**
 * Sends one signed attempt with got: the stored body bytes, the spec's headers, one timeout
 * for the whole exchange, no retries and no redirects (a 3xx fails the attempt).
 */
export class WebhookClient {
  private readonly agent: Agent;
  private readonly lookup: ReceiverLookup;
  /** got with every option that is the same for all attempts merged once, not per POST. */
  private readonly got: Got;

  constructor(private readonly options: WebhookClientOptions) {
    this.lookup = createReceiverLookup({ ...options.dns, allowPrivateTargets: options.allowPrivateTargets });
    this.agent = new BoundedAgent(options.maxTotalSockets, {
      keepAlive: true,
      // As many sockets per host as attempts may be in flight: got's timeout would otherwise
      // count the wait for a free socket, and an attempt could time out without being sent.
      maxSockets: options.maxSocketsPerHost,
      // Receivers on many hosts must not hold a descriptor each for ever (issue 8): sockets are
      // bounded in all (BoundedAgent), idle ones per host and in time. LIFO reuse lets extras go idle and close.
      maxFreeSockets: options.maxFreeSocketsPerHost,
      // The agent closes only idle sockets on it (an attempt's own bound is got's request timeout).
      timeout: options.idleSocketTimeoutMs,
      scheduling: 'lifo',
      // One secure context for every connection: without it each new TLS socket builds its own
      // (the profile showed SecureContext per connection), and passing `ca` re-parses ~140 roots.
      secureContext: createSecureContext(options.ca ? { ca: withSystemRoots(options.ca) } : {}),
    });
    // Built once: got validates and merges each option it is given on every request, so an
    // attempt passes only what differs per attempt (its body and its headers).
    this.got = got.extend({
      headers: { 'content-type': 'application/json', 'user-agent': USER_AGENT },
      agent: { https: this.agent },
      http2: false,
      followRedirect: false,
      throwHttpErrors: false,
      decompress: false,
      retry: { limit: 0 },
      timeout: { request: options.timeoutMs },
      // Always our resolver (c-ares, bounded, off the libuv pool); with the guard on it also filters.
      dnsLookup: this.lookup as never,
    });
  }

  /** Performs the attempt and describes what happened; it never throws. */
  async send(attempt: ClaimedAttempt): Promise<SentAttempt> {
    const startedAt = new Date();
    const started = performance.now();
    const finish = (statusCode: number | null, failure: { error: string; failure: FailureClass } | null, responseBytes: Buffer | null): SentAttempt => ({
      startedAt,
      durationMs: performance.now() - started,
      ok: failure === null,
      statusCode,
      error: failure?.error ?? null,
      failure: failure?.failure ?? null,
      responseBytes,
    });
    try {
      const url = new URL(attempt.url);
      if (!this.options.allowPrivateTargets) assertLiteralTargetAllowed(url);
      const { statusCode, excerpt } = await this.post(url, attempt);
      return finish(statusCode, statusFailure(statusCode), excerpt);
    } catch (error) {
      return finish(null, errorFailure(error), null);
    }
  }

  /** Open sockets of this client: in use, and idle (for tests and metrics). */
  socketCounts(): { active: number; idle: number } {
    return { active: liveSockets(this.agent.sockets).length, idle: liveSockets(this.agent.freeSockets).length };
  }

  /** Closes pooled sockets. */
  close(): void {
    this.agent.destroy();
  }

  private post(url: URL, attempt: ClaimedAttempt): Promise<{ statusCode: number; excerpt: Buffer }> {
    const body = Buffer.from(attempt.body, 'utf8');
    const stream = this.got.stream.post(url, {
      body,
      headers: {
        'x-service-event': attempt.eventType,
        'x-service-delivery-id': attempt.deliveryId,
        ...signatureHeaders({ deliveryId: attempt.deliveryId, body, secret: attempt.secret, previousSecret: attempt.previousSecret }),
      },
    });
    return new Promise((resolve, reject) => {
      let statusCode: number | undefined;
      const chunks: Buffer[] = [];
      let kept = 0;
      let read = 0;
      const finish = (dropConnection: boolean) => {
        if (statusCode === undefined) return;
        // The bytes exactly as sent: the record keeps them, response-excerpt.ts presents them.
        resolve({ statusCode, excerpt: Buffer.concat(chunks) });
        // Only a response cut short needs its connection dropped; a finished one goes back to the
        // keep-alive pool (destroying it would cost a TLS handshake on the next attempt).
        if (dropConnection) stream.destroy();
      };
      stream.on('response', (response: { statusCode: number }) => {
        statusCode = response.statusCode;
      });
      stream.on('data', (chunk: Buffer) => {
        read += chunk.length;
        if (kept < RESPONSE_EXCERPT_BYTES) {
          const slice = chunk.subarray(0, RESPONSE_EXCERPT_BYTES - kept);
          chunks.push(slice);
          kept += slice.length;
        }
        if (read >= RESPONSE_READ_LIMIT_BYTES) finish(true);
      });
      stream.on('end', () => finish(false));
      stream.on('error', (error: Error) => {
        // A status already received is the receiver's answer, even if the body then breaks off.
        if (statusCode !== undefined) finish(true);
        else reject(error);
      });
    });
  }
}

function withSystemRoots(ca: string | Buffer | Array<string | Buffer>): Array<string | Buffer> {
  // Passing `ca` replaces Node's bundled roots; keep them so public receivers still verify.
  return [...rootCertificates, ...(Array.isArray(ca) ? ca : [ca])];
}
