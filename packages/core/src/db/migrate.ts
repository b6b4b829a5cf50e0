import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { createDb } from './knex.js';

const MIGRATIONS_DIR = fileURLToPath(new URL('../../../../../migrations', import.meta.url));
const DUPLICATE_DATABASE = '42P04';
/** Two CREATE DATABASE at once can also surface as a unique violation on pg_database. */
const UNIQUE_VIOLATION = '23505';

/** Creates the database named in the URL when it does not exist yet (safe to race). */
export async function ensureDatabase(databaseUrl: string): Promise<boolean> {
  const url = new URL(databaseUrl);
  const name = decodeURIComponent(url.pathname.replace(/^\//, ''));
  if (!name) throw new Error('DATABASE_URL names no database');
  const admin = new URL(databaseUrl);
  admin.pathname = '/postgres';
  const client = new pg.Client({ connectionString: admin.toString() });
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
  const db = createDb(databaseUrl, { poolMax: 2 });
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
