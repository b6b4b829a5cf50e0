import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { NotFoundError } from '@svc/core';

/** Every id we issue is letters, digits, `_` and `-`; anything else names no resource. */
export const ID_SHAPE = /^[A-Za-z0-9_-]{1,128}$/;

/**
 * Answers not_found for a path id that no resource can have (NUL bytes, which PostgreSQL text
 * cannot hold, or kilobytes of junk) without asking the database.
 */
export function requireIdShape(param: string, notFoundMessage: string): RequestHandler {
  return (req: Request, _res: Response, next: NextFunction): void => {
    if (!ID_SHAPE.test(String(req.params[param]))) throw new NotFoundError(notFoundMessage);
    next();
  };
}
