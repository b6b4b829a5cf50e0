import { createDb, DEFAULT_DB_BOUNDS, type Db, type DbBounds } from '@svc/core';

/**
 * The dispatcher's pool. Its hot statements (claims, records, fan-outs) each take a batch of ids
 * whose size, and the tables they read, change from one execution to the next: each execution is
 * planned for its own batch (see createDb's `customPlans`; ADR 11, decision 3). Planning one costs
 * well under a millisecond of Postgres CPU per batch; a generic plan made while the tables were
 * small read every delivery row for each attempt recorded.
 */
export function createDispatcherDb(databaseUrl: string, poolMax: number, bounds: DbBounds = DEFAULT_DB_BOUNDS): Db {
  return createDb(databaseUrl, { poolMax, customPlans: true, bounds });
}
