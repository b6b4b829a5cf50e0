import type { components } from './generated/openapi.js';

/** The codes the client itself gives: a 5xx (which has no envelope), no answer, an unreadable answer. */
export type ClientErrorCode = 'server_error' | 'network_error' | 'invalid_response';
/**
 * Every code a failed call can carry: the API's (its OpenAPI document's ErrorCode) and the
 * client's own. The API may add codes, so a `switch` on it keeps a default branch.
 */
export type ErrorCode = components['schemas']['ErrorCode'] | ClientErrorCode;

/**
 * Every failed API call throws this one class. `code` is the API's stable error code
 * (`not_found`, `invalid_key`, `rate_limited`, `invalid_query`, …), or one of the client's own:
 * `server_error` for any 5xx (which carries no envelope), `network_error` when no
 * answer arrived, `invalid_response` when an answer could not be read.
 */
export class SiteVisibilityError extends Error {
  override readonly name: string = 'SiteVisibilityError';
  /** The API's error code, or `server_error`, `network_error`, `invalid_response`; a code added later arrives as its string. */
  readonly code: ErrorCode | (string & {});
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

  /** True for the failures worth retrying: 5xx and no answer at all. */
  get retryable(): boolean {
    return this.status === 0 || this.status >= 500;
  }
}

/** 401: no usable key (`unauthorized`, `invalid_key`). Fix the key; retrying will not help. */
export class AuthenticationError extends SiteVisibilityError {
  override readonly name = 'AuthenticationError';
}
/** 403 `insufficient_scope`: the key lacks the scope the call needs; the message names it. */
export class PermissionError extends SiteVisibilityError {
  override readonly name = 'PermissionError';
}
/** 404 `not_found`: no such resource in this key's account. */
export class NotFoundError extends SiteVisibilityError {
  override readonly name = 'NotFoundError';
}
/** 429 `rate_limited`: `retryAfterSeconds` says when to come back. */
export class RateLimitError extends SiteVisibilityError {
  override readonly name = 'RateLimitError';
}
/** 400, 413, 422: the request itself cannot be used (`invalid_*`, `payload_too_large`, `idempotency_key_reused`). */
export class ValidationError extends SiteVisibilityError {
  override readonly name = 'ValidationError';
}
/** 409: the resource's state refuses the change (`subscription_disabled`, `delivery_pending`, `recovery_too_large`, `idempotency_key_in_use`). */
export class ConflictError extends SiteVisibilityError {
  override readonly name = 'ConflictError';
}
/** 5xx (`server_error`) or an answer that could not be read (`invalid_response`). */
export class ServerError extends SiteVisibilityError {
  override readonly name = 'ServerError';
}
/** No answer at all (`network_error`): refused, dropped or timed out. */
export class NetworkError extends SiteVisibilityError {
  override readonly name = 'NetworkError';
}

/** The error of a failed call, as the subclass of its class of failure. */
export function errorFor(init: ConstructorParameters<typeof SiteVisibilityError>[0]): SiteVisibilityError {
  const { status, code } = init;
  if (status === 0) return new NetworkError(init);
  if (status >= 500 || code === 'invalid_response') return new ServerError(init);
  if (status === 401) return new AuthenticationError(init);
  if (status === 403) return new PermissionError(init);
  if (status === 404) return new NotFoundError(init);
  if (status === 429) return new RateLimitError(init);
  if (status === 409) return new ConflictError(init);
  if (status === 400 || status === 413 || status === 422) return new ValidationError(init);
  return new SiteVisibilityError(init);
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
  | 'invalid_body'
  | 'body_too_large';

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
