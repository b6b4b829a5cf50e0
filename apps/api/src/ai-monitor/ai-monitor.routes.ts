import { Router } from 'express';
import type { AiMonitorRun, Db } from '@svc/core';
import { accountOf, requireScope } from '../auth/authenticate.js';
import { requireIdShape } from '../http/path-params.js';

function presentRun(run: AiMonitorRun) {
  return {
    id: run.id,
    siteId: run.siteId,
    status: 'completed' as const,
    compositeScore: run.compositeScore,
    completedAt: run.completedAt.toISOString(),
    engines: run.engines.map((entry) => ({ engine: entry.engine, score: entry.score })),
  };
}

/** Issue 9: the latest completed AI Monitor run of a site (scope read:ai-monitor); `run: null` mirrors latestScan. */
export function aiMonitorRoutes(deps: { db: Db }, router: Router = Router()): Router {
  router.get(
    '/sites/:siteId/ai-monitor/latest',
    requireScope('read:ai-monitor'),
    requireIdShape('siteId', 'No site with this id exists in your account.'),
    async (req, res) => {
      const run = await accountOf(res, deps.db).aiMonitor.latestRun(String(req.params.siteId));
      res.json({ data: { run: run && presentRun(run) } });
    },
  );
  return router;
}
