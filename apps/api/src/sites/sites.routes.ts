import { Router } from 'express';
import { getSiteDetailAsJson, listSitesAsJsonArray, type Db } from '@svc/core';
import { authOf, requireScope } from '../auth/authenticate.js';
import { sendJsonText } from '../http/json-text.js';
import { requireIdShape } from '../http/path-params.js';

/** Spec §4.1, §4.2. */
export function sitesRoutes(deps: { db: Db }, router: Router = Router()): Router {
  router.get('/sites', requireScope('read:sites'), async (_req, res) => {
    // The sites come as one JSON array's text from Postgres (listSitesAsJsonArray): no presenter here.
    const sites = await listSitesAsJsonArray(deps.db, authOf(res).accountId);
    sendJsonText(res, `{"data":{"sites":${sites}}}`);
  });
  router.get(
    '/sites/:siteId',
    requireScope('read:sites'),
    requireIdShape('siteId', 'No site with this id exists in your account.'),
    async (req, res) => {
      // The site object comes as JSON text from Postgres (getSiteDetailAsJson): no presenter here.
      const site = await getSiteDetailAsJson(deps.db, authOf(res).accountId, String(req.params.siteId));
      sendJsonText(res, `{"data":{"site":${site}}}`);
    },
  );
  return router;
}
