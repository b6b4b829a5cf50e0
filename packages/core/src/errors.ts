/**
 * Typed errors for every handled failure. The API maps them to the spec's envelope in one
 * place (apps/api/src/http/error-handler.ts); nothing maps errors by message text.
 */
export abstract class DomainError extends Error {
  abstract readonly code: string;
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

export class NotFoundError extends DomainError {
  readonly code = 'not_found';
}

export type ValidationCode = 'invalid_body' | 'invalid_url' | 'invalid_events';

export class ValidationError extends DomainError {
  constructor(
    readonly code: ValidationCode,
    message: string,
  ) {
    super(message);
  }
}

export class UnauthorizedError extends DomainError {
  readonly code = 'unauthorized';
}

export class InvalidKeyError extends DomainError {
  readonly code = 'invalid_key';
}

export class InsufficientScopeError extends DomainError {
  readonly code = 'insufficient_scope';
  constructor(readonly scope: string) {
    super(`This API key lacks the scope "${scope}" that this endpoint requires.`);
  }
}

export class RateLimitedError extends DomainError {
  readonly code = 'rate_limited';
}

export class PayloadTooLargeError extends DomainError {
  readonly code = 'payload_too_large';
}

/** Bad input to an operator command (svc) or a producer function. */
export class InputError extends DomainError {
  readonly code = 'invalid_input';
}

/** A state change that the current state does not allow (completing a failed scan, say). */
export class ConflictError extends DomainError {
  readonly code = 'conflict';
}
