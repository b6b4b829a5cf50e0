import { randomUUID } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import type { Logger } from '@svc/core';

/** Gives every request an id (returned as `Request-Id`) and logs one structured line when it ends. */
export function requestContext(logger: Logger) {
  return (req: Request, res: Response, next: NextFunction): void => {
    const requestId = randomUUID();
    const started = process.hrtime.bigint();
    res.locals.requestId = requestId;
    res.setHeader('Request-Id', requestId);
    // When the level is off, skip the line entirely: winston would build and format it only to drop it.
    if (!logger.isLevelEnabled('http')) {
      next();
      return;
    }
    res.on('finish', () => {
      const auth = res.locals.auth as { id?: string; accountId?: string } | undefined;
      logger.http('request', {
        requestId,
        method: req.method,
        path: req.path,
        status: res.statusCode,
        durationMs: Number(process.hrtime.bigint() - started) / 1e6,
        keyId: auth?.id,
        accountId: auth?.accountId,
      });
    });
    next();
  };
}
