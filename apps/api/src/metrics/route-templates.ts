import { match } from 'path-to-regexp';
import type { Router } from 'express';

/** The label of a request no route matches: raw paths would make one series per scanner probe. */
export const UNMATCHED_ROUTE = 'unmatched';

interface RouteLayer {
  route?: { path: unknown; methods?: Record<string, boolean> };
  handle?: { stack?: RouteLayer[] };
}

/**
 * Finds a request's route template (`/api/v1/sites/:siteId`) from its path, for metric labels.
 * Express sets req.route only once a route matched, so a request refused earlier (401, 429)
 * would otherwise have none; this matches against every route the routers declare, in order.
 */
export class RouteTemplates {
  private readonly routes: Array<{ template: string; method: string | undefined; test: (path: string) => boolean }> = [];
  /** Each declared route's template, by the route object Express leaves in req.route once it matched. */
  private readonly byRoute = new Map<unknown, string>();

  /** Adds every route of `router` (and the routers it uses) under `prefix`. */
  add(prefix: string, router: Router): this {
    for (const layer of (router as unknown as { stack: RouteLayer[] }).stack) this.addLayer(prefix, layer);
    return this;
  }

  /**
   * The template of the route that handled the request, computed once per route at start-up;
   * for a request no route took (refused before routing, or unknown), found from its path.
   */
  templateOfRequest(req: { method: string; originalUrl: string; route?: unknown }): string {
    const known = req.route === undefined ? undefined : this.byRoute.get(req.route);
    return known ?? this.templateOf(req.method, req.originalUrl.split('?')[0] ?? '/');
  }

  templateOf(method: string, path: string): string {
    const upper = method === 'HEAD' ? 'GET' : method;
    const byMethod = this.routes.find((route) => route.method === upper && route.test(path));
    return (byMethod ?? this.routes.find((route) => route.test(path)))?.template ?? UNMATCHED_ROUTE;
  }

  private addLayer(prefix: string, layer: RouteLayer): void {
    if (layer.route && typeof layer.route.path === 'string') {
      const template = `${prefix}${layer.route.path}`;
      this.byRoute.set(layer.route, template);
      const test = match(template, { decode: false });
      const methods = Object.keys(layer.route.methods ?? {}).filter((name) => name !== '_all');
      for (const name of methods.length ? methods : [undefined]) {
        this.routes.push({ template, method: name?.toUpperCase(), test: (path) => test(path) !== false });
      }
      return;
    }
    for (const inner of layer.handle?.stack ?? []) this.addLayer(prefix, inner);
  }
}
