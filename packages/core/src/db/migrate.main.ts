import { ConfigError, loadConfig } from '../config.js';
import { migrateToLatest } from './migrate.js';

try {
  const config = loadConfig();
  const { created, applied } = await migrateToLatest(config.databaseUrl);
  const where = new URL(config.databaseUrl).pathname.slice(1);
  console.log(
    JSON.stringify({ message: 'migrations applied', database: where, created, applied, level: 'info' }),
  );
} catch (error) {
  if (error instanceof ConfigError) {
    console.error(error.message);
  } else {
    console.error(`migration failed: ${(error as Error).message}`);
  }
  process.exit(1);
}
