import { createLogger, DEFAULT_DISPATCHER_METRICS_PORT, loadConfigOrExit, startMetricsServer } from '@svc/core';
import { createDispatcher } from './dispatcher.js';
import { createDispatcherDb } from './dispatcher-db.js';
import { healthRoutes } from './health/dispatcher-health.js';

const config = loadConfigOrExit();

const logger = createLogger(config.logLevel, { service: 'dispatcher' });
const db = createDispatcherDb(config.databaseUrl, config.dbPoolMax);
const dispatcher = createDispatcher({ config, db, logger });
dispatcher.start();
// Its only HTTP port: /metrics, /healthz, /readyz. A taken port is a warning; the deliveries go on.
const metricsServer = await startMetricsServer({
  port: config.metricsPort ?? DEFAULT_DISPATCHER_METRICS_PORT,
  registry: dispatcher.metrics.registry,
  logger,
  routes: healthRoutes(() => dispatcher.readiness()),
});

let stopping = false;
async function stop(signal: string): Promise<void> {
  if (stopping) return;
  stopping = true;
  logger.info('dispatcher stopping: finishing attempts in flight', { signal });
  await dispatcher.stop();
  await metricsServer.close();
  await db.destroy();
  // Exit once the last log line is flushed; the timer only guards against a transport that never finishes.
  setTimeout(() => process.exit(0), 2_000).unref();
  logger.on('finish', () => process.exit(0));
  logger.end();
}

process.on('SIGTERM', () => void stop('SIGTERM'));
process.on('SIGINT', () => void stop('SIGINT'));
