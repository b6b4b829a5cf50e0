/**
 * Every failed API call throws this one class. `code` is the spec's stable error code
 * (`not_found`, `invalid_key`, `rate_limited`, `invalid_query`, …), or one of the client's own:
 * `server_error` for any 5xx (which carries no envelope, spec §2.1), `network_error` when no
 * answer arrived, `invalid_response` when an answer could not be read.
 */
export class SiteVisibilityError extends Error {
  override readonly name = 'SiteVisibilityError';
  /** The spec's error code, or `server_error`, `network_error`, `invalid_response`. */
  readonly code: string;
  /** The HTTP status; 0 when no response arrived. */
  readonly status: number;
  /** The `Request-Id` response header, for support requests; null when no response arrived. */
  readonly requestId: string | null;
  /** Seconds the server asked us to wait (`Retry-After`), when it said. */
  readonly retryAfterSeconds: number | null;

  constructor(init: {
    code: string;
    status: number;
    message: string;
    requestId?: string | null;
    retryAfterSeconds?: number | null;
    cause?: unknown;
  }) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.code = init.code;
    this.status = init.status;
    this.requestId = init.requestId ?? null;
    this.retryAfterSeconds = init.retryAfterSeconds ?? null;
  }

  /** True for the failures the spec calls retryable: 5xx and no answer at all (§7). */
  get retryable(): boolean {
    return this.status === 0 || this.status >= 500;
  }
}

/** Why a webhook delivery was refused by {@link verifyWebhook}. */
export type WebhookVerificationReason =
  | 'missing_signature'
  | 'invalid_signature'
  | 'missing_timestamp'
  | 'invalid_timestamp'
  | 'timestamp_too_old'
  | 'timestamp_too_new'
  | 'id_mismatch'
  | 'invalid_body';

/** A delivery that is not provably ours and fresh: answer it with a 4xx and do not act on it. */
export class WebhookVerificationError extends Error {
  override readonly name = 'WebhookVerificationError';
  constructor(
    readonly reason: WebhookVerificationReason,
    message: string,
  ) {
    super(message);
  }
}
