import { loadConfigOrExit } from '../config.js';
import { migrateToLatest } from './migrate.js';

const config = loadConfigOrExit();
try {
  const { created, applied } = await migrateToLatest(config.databaseUrl);
  const database = new URL(config.databaseUrl).pathname.slice(1);
  console.log(JSON.stringify({ level: 'info', message: 'migrations applied', database, created, applied }));
} catch (error) {
  console.error(`migration failed: ${(error as Error).message}`);
  process.exit(1);
}
