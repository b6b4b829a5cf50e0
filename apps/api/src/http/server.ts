import { createServer, type RequestListener, type Server } from 'node:http';
import type { Config } from '@svc/core';

/** Headers past this count are ignored by Node's parser (they are neither read nor stored). */
export const MAX_HEADERS_COUNT = 100;
/** How often Node looks for requests past headersTimeout / requestTimeout; at most this late. */
const MAX_CONNECTIONS_CHECK_INTERVAL_MS = 1_000;

export type ApiServerConfig = Pick<
  Config,
  'apiHeadersTimeoutMs' | 'apiRequestTimeoutMs' | 'apiKeepAliveTimeoutMs' | 'apiMaxConnections' | 'apiMaxHeaderBytes'
>;

/**
 * The API's HTTP server with every bound a hostile client could otherwise stretch set explicitly,
 * in this one place that main.ts and the tests both use (docs/operations.md, "Limits"):
 * - a client has apiHeadersTimeoutMs from connecting to finish its headers (a silent socket or
 *   a slowloris trickle gets 408 and is closed), and apiRequestTimeoutMs to finish its body;
 * - an idle keep-alive socket is closed after apiKeepAliveTimeoutMs;
 * - headers over apiMaxHeaderBytes get 431; headers past the 100th are ignored;
 * - past apiMaxConnections open sockets, new connections are closed at once.
 * The response side is not timed here: DELETE may wait for an attempt on the wire.
 */
export function createApiServer(app: RequestListener, config: ApiServerConfig): Server {
  const server = createServer(
    {
      headersTimeout: config.apiHeadersTimeoutMs,
      requestTimeout: config.apiRequestTimeoutMs,
      maxHeaderSize: config.apiMaxHeaderBytes,
      connectionsCheckingInterval: Math.min(MAX_CONNECTIONS_CHECK_INTERVAL_MS, Math.max(50, Math.floor(config.apiHeadersTimeoutMs / 5))),
    },
    app,
  );
  server.keepAliveTimeout = config.apiKeepAliveTimeoutMs;
  server.maxHeadersCount = MAX_HEADERS_COUNT;
  server.maxConnections = config.apiMaxConnections;
  return server;
}
