// Bundles the compiled CLI into dist/bundle/, which bin/svc.js runs, and writes V8 code caches
// for the bundles (apps/cli/src/bundle/run-bundled.ts loads them).
//
// Why: an `svc` command is one short process, and most of its CPU went to Node resolving,
// reading and compiling hundreds of small module files (knex and lodash alone are ~330) before
// the command did anything (docs/adr/0010). One bundled file compiles several times faster, and a
// V8 code cache spares even that compile (docs/adr/0012). Node 20 caches code only for CommonJS
// scripts run through node:vm, hence two CommonJS bundles:
//   svc.cjs         the CLI (run-cli.js) without BullMQ and ioredis: it reaches them through
//                   stand-ins whose first use loads the other bundle,
//   redis-libs.cjs  BullMQ and ioredis, so a command that only touches Postgres never loads them.
// The caches are made here after a warm-up (`svc --help`), and grow with each command's first
// successful run (run-bundled.ts).
// Each starts with `//svc-build <hash of its content>`, which names its caches: a cache of another
// build is never offered to V8.
//
//   node apps/cli/scripts/bundle.mjs        (run by `npm run build` after tsc)
import { createHash } from 'node:crypto';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const CLI = fileURLToPath(new URL('..', import.meta.url));
const OUT = `${CLI}dist/bundle`;
const require = createRequire(`${CLI}dist/src/run-cli.js`);
// The global through which svc.cjs loads redis-libs.cjs, and the build's cache warm-up (run-bundled.ts).
const { REDIS_LIBS_LOADER, writeBuildCaches } = await import(`${CLI}dist/src/bundle/run-bundled.js`);

// knex requires the driver of whichever dialect is configured, inside the dialect's code: only
// pg is ever used, the others are not installed and stay unresolved requires that never run.
const UNUSED_DRIVERS = ['mysql', 'mysql2', 'mariadb', 'mariadb/callback', 'sqlite3', 'better-sqlite3', 'tedious', 'oracledb', 'pg-query-stream', 'pg-native'];

// Packages whose import has no effect beyond the bindings it exports, so esbuild may drop an
// import whose bindings the bundle never uses (e.g. BullMQ's Queue where only the job-id helpers
// of queues.ts are used, winston where no logger is built). Our own core is written that way.
const SIDE_EFFECT_FREE = /^(@svc\/core|bullmq|ioredis|winston)(\/|$)/;

async function resolveSideEffectFree(b, args) {
  const resolved = await b.resolve(args.path, { kind: args.kind, resolveDir: args.resolveDir, importer: args.importer, pluginData: { sideEffectFree: true } });
  return resolved.errors.length ? undefined : { ...resolved, sideEffects: false };
}

// What the CLI uses of BullMQ and ioredis, reached from svc.cjs through stand-ins whose exports
// load redis-libs.cjs on first access (esbuild reads a CommonJS module's exports lazily).
const REDIS_LIBS = ['bullmq', 'ioredis'];

/**
 * An esbuild plugin that patches one file of a package as it is bundled: `find` (a string or a
 * RegExp) replaced by `replacement`. When a new version of the package no longer has `find`, the
 * file is bundled as it is, with a warning: an upgrade can only lose the saving, never break the bundle.
 */
function patchPackageFile(name, file, find, replacement) {
  const filter = new RegExp(`[\\\\/]node_modules[\\\\/]${file.split('/').map((part) => part.replace(/\./g, '\\.')).join('[\\\\/]')}$`);
  return {
    name,
    setup(b) {
      b.onLoad({ filter }, async (args) => {
        const source = await readFile(args.path, 'utf8');
        const found = typeof find === 'string' ? source.includes(find) : find.test(source);
        if (!found) return { warnings: [{ text: `${file} no longer has ${find} (bundle left as is)` }] };
        return { contents: source.replace(find, replacement), loader: 'js' };
      });
    },
  };
}

/**
 * An esbuild plugin that makes some top-level requires of one file of a package lazy: each
 * `const Name = require('spec');` (or `const { Name } = require('spec');`) listed becomes a stand-in
 * that requires the module on its first use (a call, `new`, or a property read such as
 * `Name.extend`). For modules a command never uses but the package requires at load: their code
 * then never runs and is never compiled, and the bundle's code cache no longer holds it.
 * A listed require no longer found leaves the file as it is, with a warning, like patchPackageFile.
 */
function lazyRequires(name, file, specifiers) {
  const filter = new RegExp(`[\\\\/]node_modules[\\\\/]${file.split('/').map((part) => part.replace(/\./g, '\\.')).join('[\\\\/]')}$`);
  // Appended, as a hoisted function declaration, so that a file's 'use strict' stays its first statement.
  const stub = '\nfunction __svcLazy(load) { let loaded; const target = () => (loaded ??= load()); return new Proxy(function () {}, { construct: (_, args) => Reflect.construct(target(), args), apply: (_, self, args) => Reflect.apply(target(), self, args), get: (_, key) => target()[key] }); }\n';
  return {
    name,
    setup(b) {
      b.onLoad({ filter }, async (args) => {
        let source = await readFile(args.path, 'utf8');
        for (const spec of specifiers) {
          const quoted = spec.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
          const line = new RegExp(`^const (\\{ (\\w+) \\}|\\w+) = require\\('${quoted}'\\);$`, 'm');
          const match = line.exec(source);
          if (!match) return { warnings: [{ text: `${file} no longer requires ${spec} as expected (bundle left as is)` }] };
          const [, binding, member] = match;
          source = source.replace(line, member ? `const ${member} = __svcLazy(() => require('${spec}').${member});` : `const ${binding} = __svcLazy(() => require('${spec}'));`);
        }
        return { contents: source + stub, loader: 'js' };
      });
    },
  };
}

const CLOUDFLARE_PROBE = 'function isCloudflareRuntime() {';

const PLUGINS = [
  // pg asks at load time whether it runs on Cloudflare Workers by touching the global
  // Response, which makes Node 20 load its whole fetch implementation (undici): ~15% of a
  // command's CPU. A CLI only ever runs on Node, so the bundle answers "no" directly.
  patchPackageFile('pg-on-node-only', 'pg/lib/stream.js', CLOUDFLARE_PROBE, `${CLOUDFLARE_PROBE}\n  return false;`),
  // knex maps every dialect it knows to a require of its code; the bundle would carry all
  // twelve (~130 KB of the 540 KB). Only postgres is ever configured, so only it is mapped.
  patchPackageFile(
    'knex-postgres-only',
    'knex/lib/dialects/index.js',
    /const dbNameToDialectLoader = Object\.freeze\(\{[^}]*\}\);/,
    "const dbNameToDialectLoader = Object.freeze({ postgres: () => require('./postgres') });",
  ),
  // commander requires child_process at load for its executable subcommands, which svc does
  // not have: ~4 ms of every command's start-up compiling child_process, net and dgram. It
  // is required when first used instead (spawn is all commander calls on it).
  patchPackageFile(
    'commander-child-process-on-use',
    'commander/lib/command.js',
    "const childProcess = require('node:child_process');",
    "const childProcess = { spawn: (...args) => require('node:child_process').spawn(...args) };",
  ),
  // knex requires at load its schema builders and compilers (for `knex.schema`), its migrator and
  // seeder (`knex.migrate`, `knex.seed`) and assert: the CLI uses none of them but assert's
  // failure path. Required on first use instead: ~1/10 of a command's start-up CPU (docs/adr/0023).
  lazyRequires('knex-schema-on-use', 'knex/lib/client.js', [
    './schema/builder', './schema/compiler', './schema/tablebuilder', './schema/tablecompiler',
    './schema/columnbuilder', './schema/columncompiler', './schema/viewbuilder.js', './schema/viewcompiler.js',
  ]),
  lazyRequires('knex-pg-schema-on-use', 'knex/lib/dialects/postgres/index.js', [
    './schema/pg-columncompiler', './schema/pg-tablecompiler', './schema/pg-viewcompiler', './schema/pg-viewbuilder', './schema/pg-compiler',
  ]),
  lazyRequires('knex-builders-on-use', 'knex/lib/knex-builder/Knex.js', ['../schema/builder', '../schema/viewbuilder', '../schema/columnbuilder', '../schema/tablebuilder']),
  lazyRequires('knex-migrator-on-use', 'knex/lib/knex-builder/make-knex.js', ['../migrations/migrate/Migrator', '../migrations/seed/Seeder']),
  lazyRequires('knex-assert-on-use', 'knex/lib/query/querybuilder.js', ['assert']),
  lazyRequires('knex-join-assert-on-use', 'knex/lib/query/joinclause.js', ['assert']),
  lazyRequires('knex-analytic-assert-on-use', 'knex/lib/query/analytic.js', ['assert']),
  // pg requires dns at load for one lookup made only for pg-native's connection string, which
  // the CLI never builds: dns (and its resolver) is required when first used instead.
  patchPackageFile('pg-dns-on-use', 'pg/lib/connection-parameters.js', "const dns = require('dns')", "const dns = { lookup: (...args) => require('dns').lookup(...args) }"),
  {
    name: 'side-effect-free-packages',
    setup(b) {
      b.onResolve({ filter: SIDE_EFFECT_FREE }, (args) => (args.pluginData?.sideEffectFree ? undefined : resolveSideEffectFree(b, args)));
    },
  },
];

/** The stand-in module for one of REDIS_LIBS in svc.cjs. */
function standIn(name) {
  const names = Object.keys(require(name)).filter((key) => key !== '__esModule');
  return [
    `const load = () => globalThis[Symbol.for(${JSON.stringify(REDIS_LIBS_LOADER)})]()[${JSON.stringify(name)}];`,
    "Object.defineProperty(exports, '__esModule', { value: true });",
    `for (const name of ${JSON.stringify(names)}) Object.defineProperty(exports, name, { enumerable: true, get: () => load()[name] });`,
  ].join('\n');
}

const REDIS_LIBS_FILTER = new RegExp(`^(${REDIS_LIBS.join('|')})$`);
const COMMON = {
  bundle: true,
  format: 'cjs',
  platform: 'node',
  target: 'node20',
  external: UNUSED_DRIVERS,
  minify: true,
  sourcemap: 'linked',
  logLevel: 'warning',
  write: false,
  // Only core's migrate.ts asks for its own URL (the CLI never migrates); CommonJS has __filename.
  define: { 'import.meta.url': '__svcImportMetaUrl' },
  // Replaced below by the hash of the whole file (same length, so the source map stays true).
  banner: { js: `//svc-build ${'0'.repeat(16)}\nvar __svcImportMetaUrl = require('node:url').pathToFileURL(__filename).href;` },
};

const main = await build({
  ...COMMON,
  entryPoints: { svc: `${CLI}dist/src/run-cli.js` },
  outdir: OUT,
  outExtension: { '.js': '.cjs' },
  plugins: [
    {
      name: 'redis-libs-on-first-use',
      setup(b) {
        b.onResolve({ filter: REDIS_LIBS_FILTER }, (args) => ({ path: args.path, namespace: 'redis-libs' }));
        b.onLoad({ filter: /.*/, namespace: 'redis-libs' }, (args) => ({ contents: standIn(args.path), loader: 'js' }));
      },
    },
    ...PLUGINS,
  ],
});
const libs = await build({
  ...COMMON,
  stdin: {
    contents: `module.exports = { ${REDIS_LIBS.map((name) => `${JSON.stringify(name)}: require(${JSON.stringify(name)})`).join(', ')} };`,
    resolveDir: `${CLI}dist/src`,
    sourcefile: 'redis-libs.cjs',
  },
  outfile: `${OUT}/redis-libs.cjs`,
  plugins: PLUGINS,
});

await rm(OUT, { recursive: true, force: true });
await mkdir(OUT, { recursive: true });
for (const file of [...main.outputFiles, ...libs.outputFiles]) {
  let contents = file.text;
  if (file.path.endsWith('.cjs')) {
    const id = createHash('sha256').update(contents).digest('hex').slice(0, 16);
    contents = contents.replace(`//svc-build ${'0'.repeat(16)}\n`, `//svc-build ${id}\n`);
  }
  await writeFile(file.path, contents);
}
// The launcher bin/svc.js requires: run-bundled.js and cached-script.js as one CommonJS file, so
// that a command's entry is CommonJS and Node never starts its ES module loader (~10 ms of every
// command: resolving, reading and linking the entry's imports, with fs/promises and readline
// loaded for it). It sits beside run-bundled.js, whose path to the bundles is relative to itself.
await build({
  bundle: true,
  format: 'cjs',
  platform: 'node',
  target: 'node20',
  logLevel: 'warning',
  entryPoints: [`${CLI}dist/src/bundle/run-bundled.js`],
  outfile: `${CLI}dist/src/bundle/launch.cjs`,
  define: { 'import.meta.url': '__svcImportMetaUrl' },
  banner: { js: "var __svcImportMetaUrl = require('node:url').pathToFileURL(__filename).href;" },
});
await writeBuildCaches(`${OUT}/`);
