import { Router } from 'express';
import type { Db, HistoryScan, Scan } from '@svc/core';
import { accountOf, requireScope } from '../auth/authenticate.js';
import { validateQuery } from '../http/openapi-validators.js';
import { requireIdShape } from '../http/path-params.js';
import { decodeHistoryCursor, encodeHistoryCursor } from './history-cursor.js';
import { iso } from '../http/iso.js';


function presentHistoryScan(scan: HistoryScan) {
  return {
    id: scan.id,
    score: scan.score,
    status: scan.status,
    trigger: scan.trigger,
    startedAt: scan.startedAt,
    completedAt: scan.completedAt,
  };
}

function presentScan(scan: Scan) {
  return {
    id: scan.id,
    siteId: scan.siteId,
    status: scan.status,
    score: scan.score,
    trigger: scan.trigger,
    startedAt: scan.startedAt.toISOString(),
    completedAt: iso(scan.completedAt),
    failedAt: iso(scan.failedAt),
    categories: scan.categories.map((category) => ({ name: category.name, score: category.score })),
  };
}

const parseHistoryQuery = validateQuery<{ limit: number; cursor?: string; since?: string }>('listSiteScans');

/** Issue 9: the score history of a site and one scan's detail (scope read:scans). */
export function scansRoutes(deps: { db: Db }, router: Router = Router()): Router {
  router.get(
    '/sites/:siteId/scans',
    requireScope('read:scans'),
    requireIdShape('siteId', 'No site with this id exists in your account.'),
    async (req, res) => {
      const query = parseHistoryQuery(req.query);
      const after = query.cursor === undefined ? undefined : decodeHistoryCursor(query.cursor);
      const since = query.since === undefined ? undefined : new Date(query.since);
      const page = await accountOf(res, deps.db).scans.history(String(req.params.siteId), {
        limit: query.limit,
        ...(since ? { since } : {}),
        ...(after ? { after } : {}),
      });
      res.json({ data: { scans: page.scans.map(presentHistoryScan), nextCursor: page.next ? encodeHistoryCursor(page.next) : null } });
    },
  );
  router.get(
    '/scans/:scanId',
    requireScope('read:scans'),
    requireIdShape('scanId', 'No scan with this id exists in your account.'),
    async (req, res) => {
      const scan = await accountOf(res, deps.db).scans.get(String(req.params.scanId));
      res.json({ data: { scan: presentScan(scan) } });
    },
  );
  return router;
}
