import { createOperatorDb, startMetricsServer, type Db, type Logger, type MetricsServer } from '@svc/core';
import type { Dispatcher } from './dispatcher.js';
import { healthRoutes } from './health/dispatcher-health.js';
import { DispatcherMetrics } from './metrics/dispatcher-metrics.js';

/** pg_stat_activity's name for the operator pool's connections. */
export const DISPATCHER_OPERATOR_APPLICATION_NAME = 'svc dispatcher operator port';

export interface OperatorSide {
  /** The operator pool (OPERATOR_POOL_MAX connections): /readyz's ping and the pending gauge. */
  readonly operatorDb: Db;
  /** The metrics to give createDispatcher: its Postgres gauge reads through the operator pool. */
  readonly metrics: DispatcherMetrics;
  close(): Promise<void>;
}

/**
 * What main.ts sets up before the dispatcher: an operator pool of its own, which its readiness
 * ping (createDispatcher's `operatorDb`) and scrape-time gauges use, so that probes and scrapes
 * neither take nor wait for a connection of the delivery pool.
 */
export function createOperatorSide(databaseUrl: string): OperatorSide {
  const operatorDb = createOperatorDb(databaseUrl, DISPATCHER_OPERATOR_APPLICATION_NAME);
  return { operatorDb, metrics: new DispatcherMetrics(undefined, { db: operatorDb }), close: () => operatorDb.destroy() };
}

/** The dispatcher's only HTTP port: /metrics, /healthz, /readyz, on METRICS_HOST (loopback by default). */
export function serveOperatorPort(dispatcher: Pick<Dispatcher, 'metrics' | 'readiness'>, options: { port: number; host: string; logger: Logger }): Promise<MetricsServer> {
  return startMetricsServer({
    port: options.port,
    host: options.host,
    registry: dispatcher.metrics.registry,
    logger: options.logger,
    routes: healthRoutes(() => dispatcher.readiness()),
  });
}
