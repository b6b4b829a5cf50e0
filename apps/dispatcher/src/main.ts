import { createLogger, dbBoundsOf, DEFAULT_DISPATCHER_METRICS_PORT, loadConfigOrExit, withApplicationName } from '@svc/core';
import { createDispatcher } from './dispatcher.js';
import { createDispatcherDb } from './dispatcher-db.js';
import { createOperatorSide, serveOperatorPort } from './operator-port.js';

const config = loadConfigOrExit();

const logger = createLogger(config.logLevel, { service: 'dispatcher' });
const db = createDispatcherDb(withApplicationName(config.databaseUrl, 'svc dispatcher'), config.dbPoolMax, dbBoundsOf(config));
// Probes and scrapes get a pool of their own: a burst of them never takes a delivery's connection.
const operator = createOperatorSide(config.databaseUrl);
const dispatcher = createDispatcher({ config, db, logger, metrics: operator.metrics, operatorDb: operator.operatorDb });
dispatcher.start();
// Its only HTTP port: /metrics, /healthz, /readyz, on loopback unless METRICS_HOST opens it.
// A taken port is a warning; the deliveries go on.
const metricsServer = await serveOperatorPort(dispatcher, {
  port: config.metricsPort ?? DEFAULT_DISPATCHER_METRICS_PORT,
  host: config.metricsHost,
  logger,
});

let stopping = false;
async function stop(signal: string): Promise<void> {
  if (stopping) return;
  stopping = true;
  logger.info('dispatcher stopping: finishing attempts in flight', { signal });
  await dispatcher.stop();
  await metricsServer.close();
  await operator.close();
  await db.destroy();
  // Exit once the last log line is flushed; the timer only guards against a transport that never finishes.
  setTimeout(() => process.exit(0), 2_000).unref();
  logger.on('finish', () => process.exit(0));
  logger.end();
}

process.on('SIGTERM', () => void stop('SIGTERM'));
process.on('SIGINT', () => void stop('SIGINT'));
