import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { createDb } from './knex.js';

const MIGRATIONS_DIR = fileURLToPath(new URL('../../../../../migrations', import.meta.url));
const DUPLICATE_DATABASE = '42P04';
/** Two CREATE DATABASE at once can also surface as a unique violation on pg_database. */
const UNIQUE_VIOLATION = '23505';

/** A client on the server's `postgres` database, for creating and dropping databases. */
function adminClient(databaseUrl: string): pg.Client {
  const admin = new URL(databaseUrl);
  admin.pathname = '/postgres';
  return new pg.Client({ connectionString: admin.toString() });
}

/** Drops the database named in the URL, closing its connections (tests and benchmarks only). */
export async function dropDatabase(databaseUrl: string): Promise<void> {
  const name = decodeURIComponent(new URL(databaseUrl).pathname.replace(/^\//, ''));
  const client = adminClient(databaseUrl);
  await client.connect();
  try {
    await client.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(name)} WITH (FORCE)`);
  } finally {
    await client.end();
  }
}

/** Creates the database named in the URL when it does not exist yet (safe to race). */
export async function ensureDatabase(databaseUrl: string): Promise<boolean> {
  const url = new URL(databaseUrl);
  const name = decodeURIComponent(url.pathname.replace(/^\//, ''));
  if (!name) throw new Error('DATABASE_URL names no database');
  const client = adminClient(databaseUrl);
  await client.connect();
  try {
    const found = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (found.rowCount) return false;
    try {
      await client.query(`CREATE DATABASE ${pg.escapeIdentifier(name)}`);
      return true;
    } catch (error) {
      const code = (error as { code?: string }).code;
      if (code === DUPLICATE_DATABASE || code === UNIQUE_VIOLATION) return false;
      throw error;
    }
  } finally {
    await client.end();
  }
}

/** Creates the database if needed and applies every pending migration; idempotent. */
export async function migrateToLatest(databaseUrl: string): Promise<{ created: boolean; applied: string[] }> {
  const created = await ensureDatabase(databaseUrl);
  const db = createDb(databaseUrl, { poolMax: 2, bounds: { statementTimeoutMs: 0, lockTimeoutMs: 0 } });
  try {
    const [, applied] = (await db.migrate.latest({
      directory: MIGRATIONS_DIR,
      loadExtensions: ['.mjs'],
    })) as [number, string[]];
    return { created, applied };
  } finally {
    await db.destroy();
  }
}
