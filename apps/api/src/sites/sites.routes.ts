import { Router } from 'express';
import type { Db, SiteDetail, SiteSummary } from '@svc/core';
import { accountOf, requireScope } from '../auth/authenticate.js';
import { requireIdShape } from '../http/path-params.js';

function presentSite(site: SiteSummary) {
  return { id: site.id, domain: site.domain, name: site.name, status: site.status, createdAt: site.createdAt.toISOString() };
}

function presentSiteDetail(site: SiteDetail) {
  const scan = site.latestScan;
  return {
    ...presentSite(site),
    latestScan: scan && { id: scan.id, score: scan.score, status: scan.status, completedAt: scan.completedAt.toISOString() },
  };
}

/** Spec §4.1, §4.2. */
export function sitesRoutes(deps: { db: Db }, router: Router = Router()): Router {
  router.get('/sites', requireScope('read:sites'), async (_req, res) => {
    const sites = await accountOf(res, deps.db).sites.list();
    res.json({ data: { sites: sites.map(presentSite) } });
  });
  router.get(
    '/sites/:siteId',
    requireScope('read:sites'),
    requireIdShape('siteId', 'No site with this id exists in your account.'),
    async (req, res) => {
      const site = await accountOf(res, deps.db).sites.get(String(req.params.siteId));
      res.json({ data: { site: presentSiteDetail(site) } });
    },
  );
  return router;
}
