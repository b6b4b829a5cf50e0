import { createDb, type Db } from '../db/knex.js';

/**
 * Connections of a process's operator pool: the one /readyz pings and scrape-time gauges read
 * through. Two: a probe and a scrape at once; more of either wait for these, never for the
 * connections that serve requests or deliveries.
 */
export const OPERATOR_POOL_MAX = 2;

/**
 * DATABASE_URL with an application_name (what pg_stat_activity shows for each connection), unless
 * the operator already chose one in the URL: an operator can then tell a process's pools apart.
 */
export function withApplicationName(databaseUrl: string, applicationName: string): string {
  const url = new URL(databaseUrl);
  if (url.searchParams.has('application_name')) return databaseUrl;
  url.searchParams.set('application_name', applicationName);
  return url.toString();
}

/**
 * The operator pool of a process: readiness pings and scrape-time gauges go through it, so a burst
 * of probes or scrapes can never take a connection of the process's main pool, and a main pool
 * busy to its last connection never makes a probe wait for one.
 */
export function createOperatorDb(databaseUrl: string, applicationName: string): Db {
  return createDb(withApplicationName(databaseUrl, applicationName), { poolMax: OPERATOR_POOL_MAX });
}
