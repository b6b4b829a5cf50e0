import { Router } from 'express';
import { getSiteDetail, listSitesAsShown, type Db, type ShownSiteSummary, type SiteDetail, type SiteSummary } from '@svc/core';
import { authOf, requireScope } from '../auth/authenticate.js';
import { requireIdShape } from '../http/path-params.js';

function presentSummary(site: SiteSummary) {
  return { id: site.id, domain: site.domain, name: site.name, status: site.status, createdAt: site.createdAt.toISOString() };
}

function presentShownSummary(site: ShownSiteSummary) {
  return { id: site.id, domain: site.domain, name: site.name, status: site.status, createdAt: site.createdAt };
}

function presentDetail(site: SiteDetail) {
  return {
    ...presentSummary(site),
    latestScan: site.latestScan && {
      id: site.latestScan.id,
      score: site.latestScan.score,
      status: site.latestScan.status,
      completedAt: site.latestScan.completedAt.toISOString(),
    },
  };
}

/** Spec §4.1, §4.2. */
export function sitesRoutes(deps: { db: Db }, router: Router = Router()): Router {
  router.get('/sites', requireScope('read:sites'), async (_req, res) => {
    const sites = await listSitesAsShown(deps.db, authOf(res).accountId);
    res.json({ data: { sites: sites.map(presentShownSummary) } });
  });
  router.get(
    '/sites/:siteId',
    requireScope('read:sites'),
    requireIdShape('siteId', 'No site with this id exists in your account.'),
    async (req, res) => {
      const site = await getSiteDetail(deps.db, authOf(res).accountId, String(req.params.siteId));
      res.json({ data: { site: presentDetail(site) } });
    },
  );
  return router;
}
