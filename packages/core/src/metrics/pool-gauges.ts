import { Gauge, type Registry } from 'prom-client';
import type { Db } from '../db/knex.js';

/** A process's PostgreSQL pools, as the gauges label them: `main` serves requests or deliveries, `operator` probes and scrapes. */
export interface ProcessPools {
  main?: Db;
  operator?: Db;
}

/** What knex's pool (tarn) knows of itself: in memory, read with no query. */
interface TarnPool {
  numUsed(): number;
  numPendingAcquires(): number;
  readonly max: number;
}

/**
 * The pool gauges of one process, `<prefix>_db_pool_connections_in_use`, `_acquires_waiting` and
 * `_connections_max`, labelled `pool`: read from each pool at scrape time, so a scrape costs no
 * connection and shows a pool busy to its last connection as it is.
 */
export class PoolGauges {
  private pools: ProcessPools = {};

  constructor(registry: Registry, prefix: string) {
    const gauges = this;
    const gauge = (name: string, help: string, read: (pool: TarnPool) => number) =>
      new Gauge({
        name: `${prefix}_db_pool_${name}`,
        help,
        labelNames: ['pool'],
        registers: [registry],
        collect() {
          this.reset();
          for (const [label, pool] of gauges.tarnPools()) this.set({ pool: label }, read(pool));
        },
      });
    gauge('connections_in_use', 'PostgreSQL connections taken from the pool, by pool (main, operator)', (pool) => pool.numUsed());
    gauge('acquires_waiting', 'Queries waiting for a connection of the pool, by pool (main, operator)', (pool) => pool.numPendingAcquires());
    gauge('connections_max', 'The pool’s maximum number of connections (DB_POOL_MAX; OPERATOR_POOL_MAX), by pool', (pool) => pool.max);
  }

  /** The pools to read from now on. */
  watch(pools: ProcessPools): void {
    this.pools = pools;
  }

  private tarnPools(): Array<[string, TarnPool]> {
    const found: Array<[string, TarnPool]> = [];
    for (const [label, db] of Object.entries(this.pools) as Array<[string, Db | undefined]>) {
      // A destroyed knex has no pool left.
      const pool = (db?.client as { pool?: TarnPool } | undefined)?.pool;
      if (pool) found.push([label, pool]);
    }
    return found;
  }
}
