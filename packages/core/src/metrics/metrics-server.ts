import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';
import type { Logger } from '../logger.js';

/** An extra GET route on the metrics port (the dispatcher's /healthz and /readyz). */
export type OperatorRoute = () => Promise<{ status: number; body: unknown }> | { status: number; body: unknown };

export interface MetricsServerOptions {
  /** 0 turns the server off. */
  port: number;
  registry: Registry;
  logger: Logger;
  routes?: Record<string, OperatorRoute>;
  /**
   * The address to bind (METRICS_HOST); loopback when not given. The port has no authentication,
   * so it listens on another interface only when the operator says so.
   */
  host?: string;
}

/** Where the operator port listens unless told otherwise: this machine only. */
export const DEFAULT_METRICS_HOST = '127.0.0.1';

export interface MetricsServer {
  /** The port actually bound (useful with port 0 in tests), or undefined when off or not bound. */
  readonly port: number | undefined;
  close(): Promise<void>;
}

const OFF: MetricsServer = { port: undefined, close: async () => undefined };

/**
 * Serves GET /metrics (Prometheus text format) and the given routes on the process's own
 * operator port, never on the public API port. A port already taken (a second process of the
 * same kind on one host) is one warning naming METRICS_PORT: the process's real work goes on.
 */
export async function startMetricsServer(options: MetricsServerOptions): Promise<MetricsServer> {
  if (options.port === 0) return OFF;
  const host = options.host ?? DEFAULT_METRICS_HOST;
  const scrape = sharedScrape(options.registry);
  const server = createServer((req, res) => void answer(options, scrape, req, res));
  const bound = await new Promise<boolean>((resolve) => {
    server.once('error', (error: NodeJS.ErrnoException) => {
      // An address this machine does not have is METRICS_HOST's fault; anything else (a taken port) METRICS_PORT's.
      const hostAtFault = error.code === 'EADDRNOTAVAIL';
      options.logger.warn(
        hostAtFault
          ? 'metrics host unavailable; running without /metrics — set METRICS_HOST to an address of this machine'
          : 'metrics port unavailable; running without /metrics — set METRICS_PORT to a free port, or 0 to turn it off',
        {
          variable: hostAtFault ? 'METRICS_HOST' : 'METRICS_PORT',
          port: options.port,
          ...(hostAtFault ? { host } : {}),
          error: error.code ?? error.message,
        },
      );
      resolve(false);
    });
    server.listen(options.port, host, () => resolve(true));
  });
  if (!bound) return OFF;
  return {
    port: (server.address() as AddressInfo).port,
    close: () => closeServer(server),
  };
}

/**
 * Scrapes that arrive while one is being collected share its text: a burst of scrapes costs one
 * collection (one reading of each gauge from Redis or Postgres), not one per scrape.
 */
function sharedScrape(registry: Registry): () => Promise<string> {
  let running: Promise<string> | undefined;
  return () => {
    running ??= registry.metrics().finally(() => {
      running = undefined;
    });
    return running;
  };
}

/** One request on the operator port; a failing collector is a bare 500, never a crash. */
async function answer(options: MetricsServerOptions, scrape: () => Promise<string>, req: IncomingMessage, res: ServerResponse): Promise<void> {
  try {
    const path = new URL(req.url ?? '/', 'http://metrics').pathname;
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD' }).end();
      return;
    }
    if (path === '/metrics') {
      const text = await scrape();
      res.writeHead(200, { 'content-type': options.registry.contentType }).end(text);
      return;
    }
    const route = options.routes?.[path];
    if (!route) {
      res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'not_found' }));
      return;
    }
    const { status, body } = await route();
    res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  } catch (error) {
    options.logger.warn('metrics port request failed', { error: (error as Error).message });
    if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
    res.end('Internal Server Error');
  }
}

function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeIdleConnections();
  });
}
