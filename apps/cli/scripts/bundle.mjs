// Bundles the compiled CLI (dist/src/main.js) into dist/bundle/, which bin/svc.js runs.
//
// Why: an `svc` command is one short process, and most of its CPU went to Node resolving,
// reading and compiling hundreds of small module files (knex and lodash alone are ~330) before
// the command did anything. One bundled file per need compiles several times faster. Code
// splitting keeps what only some commands need (ioredis and BullMQ, loaded by
// cli-resources.ts through a dynamic import) in a chunk of its own. See docs/adr/0010.
//
//   node apps/cli/scripts/bundle.mjs        (run by `npm run build` after tsc)
import { readFile, rm } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const CLI = fileURLToPath(new URL('..', import.meta.url));
const OUT = `${CLI}dist/bundle`;

// knex requires the driver of whichever dialect is configured, inside the dialect's code: only
// pg is ever used, the others are not installed and stay unresolved requires that never run.
const UNUSED_DRIVERS = ['mysql', 'mysql2', 'mariadb', 'mariadb/callback', 'sqlite3', 'better-sqlite3', 'tedious', 'oracledb', 'pg-query-stream', 'pg-native'];

// Packages whose import has no effect beyond the bindings it exports, so esbuild may drop an
// import whose bindings the bundle never uses (e.g. BullMQ's Queue where only the job-id helpers
// of queues.ts are used, winston where no logger is built). Our own core is written that way.
const SIDE_EFFECT_FREE = /^(@svc\/core|bullmq|ioredis|winston)(\/|$)/;

await rm(OUT, { recursive: true, force: true });
await build({
  entryPoints: { svc: `${CLI}dist/src/main.js` },
  outdir: OUT,
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  outExtension: { '.js': '.mjs' },
  chunkNames: 'chunks/[name]-[hash]',
  external: UNUSED_DRIVERS,
  // CommonJS packages inside an ES module bundle still call require() for Node's own modules.
  banner: { js: "import { createRequire as __svcCreateRequire } from 'node:module'; const require = __svcCreateRequire(import.meta.url);" },
  minify: true,
  sourcemap: 'linked',
  logLevel: 'warning',
  plugins: [
    {
      // pg asks at load time whether it runs on Cloudflare Workers by touching the global
      // Response, which makes Node 20 load its whole fetch implementation (undici): ~15% of a
      // command's CPU. A CLI only ever runs on Node, so the bundle answers "no" directly.
      name: 'pg-on-node-only',
      setup(b) {
        b.onLoad({ filter: /[\\/]node_modules[\\/]pg[\\/]lib[\\/]stream\.js$/ }, async (args) => {
          const source = await readFile(args.path, 'utf8');
          const probe = 'function isCloudflareRuntime() {';
          if (!source.includes(probe)) return { warnings: [{ text: `pg/lib/stream.js no longer has ${probe} (bundle left as is)` }] };
          return { contents: source.replace(probe, `${probe}\n  return false;`), loader: 'js' };
        });
      },
    },
    {
      name: 'side-effect-free-packages',
      setup(b) {
        b.onResolve({ filter: SIDE_EFFECT_FREE }, async (args) => {
          if (args.pluginData?.sideEffectFree) return undefined;
          const resolved = await b.resolve(args.path, { kind: args.kind, resolveDir: args.resolveDir, importer: args.importer, pluginData: { sideEffectFree: true } });
          return resolved.errors.length ? undefined : { ...resolved, sideEffects: false };
        });
      },
    },
  ],
});
