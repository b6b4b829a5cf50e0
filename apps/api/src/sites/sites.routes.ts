import { Router } from 'express';
import type { Db } from '@svc/core';
import { accountOf, requireScope } from '../auth/authenticate.js';
import { sendJsonText } from '../http/json-text.js';
import { requireIdShape } from '../http/path-params.js';

/** Spec §4.1, §4.2. */
export function sitesRoutes(deps: { db: Db }, router: Router = Router()): Router {
  router.get('/sites', requireScope('read:sites'), async (_req, res) => {
    // The JSON text comes from Postgres (ADR 12): no presenter here.
    const sites = await accountOf(res, deps.db).sites.listJson();
    sendJsonText(res, `{"data":{"sites":${sites}}}`);
  });
  router.get(
    '/sites/:siteId',
    requireScope('read:sites'),
    requireIdShape('siteId', 'No site with this id exists in your account.'),
    async (req, res) => {
      const site = await accountOf(res, deps.db).sites.getJson(String(req.params.siteId));
      sendJsonText(res, `{"data":{"site":${site}}}`);
    },
  );
  return router;
}
