import knexFactory, { type Knex } from 'knex';

export type Db = Knex;
export type DbOrTx = Knex | Knex.Transaction;

/** A knex pool on PostgreSQL. */
export function createDb(databaseUrl: string, options: { poolMax?: number } = {}): Db {
  return knexFactory({
    client: 'pg',
    connection: databaseUrl,
    pool: { min: 0, max: options.poolMax ?? 10 },
    acquireConnectionTimeout: 10_000,
  });
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
