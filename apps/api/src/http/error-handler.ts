import type { ErrorRequestHandler, NextFunction, Request, Response } from 'express';
import { DomainError, NotFoundError, PayloadTooLargeError, RateLimitedError, ValidationError, type Logger } from '@svc/core';

/** Spec §7, §8: a refused request may try again after this many seconds. */
const RETRY_AFTER_SECONDS = '60';

/** Errors raised by Express's body parser carry a `type`; map the client-caused ones. */
function fromBodyParser(error: unknown): DomainError | undefined {
  const type = (error as { type?: unknown }).type;
  if (type === 'entity.too.large') {
    return new PayloadTooLargeError('The request body is too large.');
  }
  if (type === 'entity.parse.failed' || type === 'charset.unsupported' || type === 'encoding.unsupported') {
    return new ValidationError('invalid_body', 'The request body is not valid JSON.');
  }
  // A Content-Encoding the body does not match (corrupt or truncated gzip): zlib's error, given status 400 by the parser.
  const { code, status } = error as { code?: unknown; status?: unknown };
  if (status === 400 && typeof code === 'string' && code.startsWith('Z_')) {
    return new ValidationError('invalid_body', 'The request body could not be decompressed.');
  }
  return undefined;
}

/**
 * The router throws a URIError (status 400) for a path parameter that is not valid
 * percent-encoding; no resource has such an id, so it is the envelope's not_found, not a 5xx.
 */
function fromRouter(error: unknown): DomainError | undefined {
  if (error instanceof URIError && (error as { status?: unknown }).status === 400) {
    return new NotFoundError('No resource has this id: the path is not valid percent-encoding.');
  }
  return undefined;
}

/** Unmatched routes: the envelope's not_found. */
export function notFound(req: Request, _res: Response, next: NextFunction): void {
  next(new NotFoundError(`No endpoint ${req.method} ${req.path}.`));
}

/** Maps typed errors to the envelope at the status their type carries; everything else is a bare 500 with nothing internal in it. */
export function errorHandler(logger: Logger, metrics: { errorAnswered(code: string): void }): ErrorRequestHandler {
  return (error: unknown, req: Request, res: Response, next: NextFunction) => {
    if (res.headersSent) {
      next(error);
      return;
    }
    const handled = error instanceof DomainError ? error : (fromBodyParser(error) ?? fromRouter(error));
    if (handled) {
      const { status } = handled;
      metrics.errorAnswered(handled.code);
      if (handled instanceof RateLimitedError) res.set('Retry-After', RETRY_AFTER_SECONDS);
      if (status === 401) res.set('WWW-Authenticate', 'Bearer');
      res.status(status).json({ error: { code: handled.code, message: handled.message } });
      return;
    }
    const aborted = (error as { type?: unknown }).type === 'request.aborted';
    logger.error(aborted ? 'request aborted by client' : 'unexpected error', {
      requestId: res.locals.requestId,
      method: req.method,
      path: req.path,
      error: error instanceof Error ? { name: error.name, message: error.message, stack: error.stack } : String(error),
    });
    res.status(500).type('text/plain').send('Internal Server Error');
  };
}
