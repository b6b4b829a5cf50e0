// Bundles the compiled CLI (dist/src/run-cli.js) and everything it imports into one CommonJS
// file, dist/bundle/svc.cjs, which bin/svc.js runs.
//
// Why: an `svc` command is one short process, and most of its CPU goes to Node resolving,
// reading and compiling hundreds of small module files (knex, lodash, BullMQ, ioredis…) before
// the command does anything. One file costs a fraction of that (docs/cli.md gives the figures;
// `npm run bench -- --only=cli` measures both).
//
//   node apps/cli/scripts/bundle.mjs        (run by `npm run build` after tsc)
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const CLI = fileURLToPath(new URL('..', import.meta.url));

await build({
  entryPoints: [`${CLI}dist/src/run-cli.js`],
  outfile: `${CLI}dist/bundle/svc.cjs`,
  bundle: true,
  format: 'cjs',
  platform: 'node',
  target: 'node20',
  // knex requires the driver of whichever dialect is configured: only pg is installed and used.
  external: ['mysql', 'mysql2', 'mariadb', 'mariadb/callback', 'sqlite3', 'better-sqlite3', 'tedious', 'oracledb', 'pg-query-stream', 'pg-native'],
  minify: true,
  sourcemap: 'linked',
  logLevel: 'warning',
  // core's migrate.ts reads its own URL at load; a CommonJS file has __filename instead.
  define: { 'import.meta.url': '__importMetaUrl' },
  banner: { js: "var __importMetaUrl = require('node:url').pathToFileURL(__filename).href;" },
});
