/**
 * Typed errors for every handled failure. Each type carries its own HTTP status, so the API's
 * one error middleware (apps/api/src/http/error-handler.ts) maps any of them to the spec's
 * envelope and a new error type cannot fall through to a silent 500. Nothing maps errors by
 * message text.
 */
export abstract class DomainError extends Error {
  /** Stable, machine-readable (spec §2.1, §7). */
  abstract readonly code: string;
  /** The HTTP status this error is answered with, a 4xx: a 5xx never carries the envelope. */
  abstract readonly status: number;
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

export class NotFoundError extends DomainError {
  readonly code = 'not_found';
  readonly status = 404;
}

export type ValidationCode = 'invalid_body' | 'invalid_url' | 'invalid_events';

/** A request body that cannot be used; 400 (docs/api-behaviour.md: the spec leaves the status open). */
export class ValidationError extends DomainError {
  readonly status = 400;
  constructor(
    readonly code: ValidationCode,
    message: string,
  ) {
    super(message);
  }
}

export class UnauthorizedError extends DomainError {
  readonly code = 'unauthorized';
  readonly status = 401;
}

export class InvalidKeyError extends DomainError {
  readonly code = 'invalid_key';
  readonly status = 401;
}

export class InsufficientScopeError extends DomainError {
  readonly code = 'insufficient_scope';
  readonly status = 403;
  constructor(readonly scope: string) {
    super(`This API key lacks the scope "${scope}" that this endpoint requires.`);
  }
}

export class RateLimitedError extends DomainError {
  readonly code = 'rate_limited';
  readonly status = 429;
}

export class PayloadTooLargeError extends DomainError {
  readonly code = 'payload_too_large';
  readonly status = 413;
}

/** Bad input to an operator command (svc) or a producer function. */
export class InputError extends DomainError {
  readonly code = 'invalid_input';
  readonly status = 400;
  /** The input field the message is about, when it is about one (a form shows it beside that field). */
  constructor(
    message: string,
    readonly field?: string,
  ) {
    super(message);
  }
}

/** A state change that the current state does not allow (completing a failed scan, say). */
export class ConflictError extends DomainError {
  readonly code = 'conflict';
  readonly status = 409;
}

/** A redelivery refused because the subscription was auto-disabled: it never resumes (spec §3.2). */
export class SubscriptionDisabledError extends DomainError {
  readonly code = 'subscription_disabled';
  readonly status = 409;
}

/** A redelivery refused while a delivery of the same event to the same subscription is still pending. */
export class DeliveryPendingError extends DomainError {
  readonly code = 'delivery_pending';
  readonly status = 409;
}

/** A query parameter that cannot be used (400); the message names the parameter. */
export class InvalidQueryError extends DomainError {
  readonly code = 'invalid_query';
  readonly status = 400;
  constructor(
    readonly parameter: string,
    message: string,
  ) {
    super(message);
  }
}

/** A Settings sign-in link that was never issued or was altered (401): no session. */
export class SettingsLinkInvalidError extends DomainError {
  readonly code = 'link_invalid';
  readonly status = 401;
}

/** A Settings sign-in link already used or past its expiry (410): no session. */
export class SettingsLinkGoneError extends DomainError {
  readonly code = 'link_gone';
  readonly status = 410;
}

/** A browser request to Settings without a live session (401). */
export class SettingsSessionError extends DomainError {
  readonly code = 'session_ended';
  readonly status = 401;
}

/** A change in Settings without the session's CSRF token (403): nothing changed. */
export class CsrfError extends DomainError {
  readonly code = 'csrf_failed';
  readonly status = 403;
}

/** A recovery that would send more than a call may (the message gives the count): narrow the window. */
export class RecoveryTooLargeError extends DomainError {
  readonly code = 'recovery_too_large';
  readonly status = 409;
  constructor(
    readonly count: number,
    readonly max: number,
  ) {
    super(`${count} failed deliveries are in this window; a recovery sends at most ${max}. Narrow the window with since and until.`);
  }
}

/** An Idempotency-Key header that is not 1-255 printable ASCII characters. */
export class InvalidIdempotencyKeyError extends DomainError {
  readonly code = 'invalid_idempotency_key';
  readonly status = 400;
}

/** The same Idempotency-Key sent again with another method, path or body: nothing is done. */
export class IdempotencyKeyReusedError extends DomainError {
  readonly code = 'idempotency_key_reused';
  readonly status = 422;
}

/** A request with this Idempotency-Key is still being answered: try again once it has been. */
export class IdempotencyKeyInUseError extends DomainError {
  readonly code = 'idempotency_key_in_use';
  readonly status = 409;
}
