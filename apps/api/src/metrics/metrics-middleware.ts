import type { NextFunction, Request, Response } from 'express';
import type { ApiMetrics } from './api-metrics.js';
import type { RouteTemplates } from './route-templates.js';

/** Counts and times every answered request under its route template, once its response ends. */
export function measureRequests(metrics: ApiMetrics, routes: RouteTemplates) {
  return (req: Request, res: Response, next: NextFunction): void => {
    const started = process.hrtime.bigint();
    res.on('finish', () => {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      metrics.requestFinished(req.method, routes.templateOfRequest(req), res.statusCode, seconds);
    });
    next();
  };
}
