import { migrateToLatest } from '../db/migrate.js';
import { TEST_DATABASE_URL } from './index.js';

/** Jest global setup: the test database exists and is migrated before any test runs. */
export default async function globalSetup(): Promise<void> {
  await migrateToLatest(TEST_DATABASE_URL);
}
