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
  host?: string;
}

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
  const server = createServer((req, res) => void answer(options, req, res));
  const bound = await new Promise<boolean>((resolve) => {
    server.once('error', (error: NodeJS.ErrnoException) => {
      options.logger.warn('metrics port unavailable; running without /metrics — set METRICS_PORT to a free port, or 0 to turn it off', {
        variable: 'METRICS_PORT',
        port: options.port,
        error: error.code ?? error.message,
      });
      resolve(false);
    });
    server.listen(options.port, options.host, () => resolve(true));
  });
  if (!bound) return OFF;
  return {
    port: (server.address() as AddressInfo).port,
    close: () => closeServer(server),
  };
}

/** One request on the operator port; a failing collector is a bare 500, never a crash. */
async function answer(options: MetricsServerOptions, req: IncomingMessage, res: ServerResponse): Promise<void> {
  try {
    const path = new URL(req.url ?? '/', 'http://metrics').pathname;
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD' }).end();
      return;
    }
    if (path === '/metrics') {
      const text = await options.registry.metrics();
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
