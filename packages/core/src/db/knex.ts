import knexFactory, { type Knex } from 'knex';

export type Db = Knex;
export type DbOrTx = Knex | Knex.Transaction;

type DbLog = (message: string) => void;

/**
 * How long one statement may run and wait for a lock (0: no bound). The service's pools have both
 * (DB_STATEMENT_TIMEOUT_MS, DB_LOCK_TIMEOUT_MS): a statement stuck behind another transaction's
 * lock fails and is retried instead of holding its connection and its caller without end.
 * Migrations run unbounded: building an index on a large table takes as long as it takes.
 */
export interface DbBounds {
  statementTimeoutMs: number;
  lockTimeoutMs: number;
}

/** The bounds of a pool made without configuration (tools, tests): DB_STATEMENT_TIMEOUT_MS's and DB_LOCK_TIMEOUT_MS's defaults. */
export const DEFAULT_DB_BOUNDS: DbBounds = Object.freeze({ statementTimeoutMs: 30_000, lockTimeoutMs: 5_000 });

/** The configured bounds of the service's pools. */
export function dbBoundsOf(config: { dbStatementTimeoutMs: number; dbLockTimeoutMs: number }): DbBounds {
  return { statementTimeoutMs: config.dbStatementTimeoutMs, lockTimeoutMs: config.dbLockTimeoutMs };
}

/** TCP keepalive probes start after this long idle. */
const KEEPALIVE_IDLE_MS = 10_000;

/** knex's own warnings go to stderr (or the caller's logger), never to stdout where results go. */
function knexLog(log: DbLog | undefined) {
  const write: DbLog = log ?? ((message) => process.stderr.write(`${JSON.stringify({ level: 'warn', message })}\n`));
  const text = (value: unknown) => (value instanceof Error ? value.message : String(value));
  return { warn: (m: unknown) => write(text(m)), error: (m: unknown) => write(text(m)), deprecate: (m: unknown) => write(text(m)), debug: () => undefined };
}

/**
 * A knex pool on PostgreSQL. Hot queries pass `.options({ name: 'svc_…' })`, which pg turns into a
 * named prepared statement per connection (parsed and planned once); a name must always stand for
 * the same SQL text.
 */
export function createDb(
  databaseUrl: string,
  options: { poolMax?: number; log?: DbLog; customPlans?: boolean; bounds?: DbBounds } = {},
): Db {
  const bounds = options.bounds ?? DEFAULT_DB_BOUNDS;
  return knexFactory({
    client: 'pg',
    connection: {
      connectionString: databaseUrl,
      // A peer (or a NAT) that vanished without a word is found out by the kernel, not never.
      keepAlive: true,
      keepAliveInitialDelayMillis: KEEPALIVE_IDLE_MS,
      ...(bounds.statementTimeoutMs > 0 ? { statement_timeout: bounds.statementTimeoutMs } : {}),
      ...(bounds.lockTimeoutMs > 0 ? { lock_timeout: bounds.lockTimeoutMs } : {}),
      // A transaction left open by a stalled process holds its locks until this, not forever.
      ...(bounds.statementTimeoutMs > 0 ? { idle_in_transaction_session_timeout: 2 * bounds.statementTimeoutMs } : {}),
    },
    pool: { min: 0, max: options.poolMax ?? 10, ...(options.customPlans ? { afterCreate: planEveryExecution } : {}) },
    acquireConnectionTimeout: 10_000,
    log: knexLog(options.log),
  });
}

type PgConnection = { query(sql: string, callback: (error: Error | null) => void): void };

/**
 * `customPlans`: every execution of a named statement is planned with its actual parameters
 * (`plan_cache_mode = force_custom_plan`); it stays parsed once per connection. A generic plan is
 * made once, at a statement's sixth execution, and kept for the life of the connection: for a
 * batch statement it assumes every array holds 10 elements and keeps whatever the tables looked
 * like then (an empty table is read by a sequential scan), until an ANALYZE happens to invalidate it.
 */
function planEveryExecution(connection: PgConnection, done: (error: Error | null, connection: PgConnection) => void): void {
  connection.query('SET plan_cache_mode = force_custom_plan', (error) => done(error, connection));
}

/** True when the database answers a trivial query within the timeout. */
export async function pingDb(db: Db, timeoutMs = 1_000): Promise<boolean> {
  try {
    await withTimeout(db.raw('SELECT 1'), timeoutMs);
    return true;
  } catch {
    return false;
  }
}

function withTimeout<T>(promise: PromiseLike<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('timeout')), ms);
    Promise.resolve(promise).then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error instanceof Error ? error : new Error(String(error)));
      },
    );
  });
}
