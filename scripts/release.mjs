// `npm run release`: builds release/, the folder operators ship and the Docker image copies.
//
//   npm run release                     # build, then → ./release (replaced)
//   node scripts/release.mjs --out DIR  # → DIR, which must be empty or absent; the build must have run
//
// It holds the compiled JavaScript of the service's packages (no TypeScript sources, declarations,
// source maps or tests), the migrations, the production dependencies at exactly the versions
// package-lock.json pins (installed by `npm ci --omit=dev`, so no dev tool is in it), and a
// package.json of its own with the operator contract's scripts (migrate, start, start:api,
// start:dispatcher) and the `svc` bin. It runs with Node.js alone: `npm run --prefix release start:api`.
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const args = process.argv.slice(2);
const outIndex = args.indexOf('--out');
if (outIndex !== -1 && args[outIndex + 1] === undefined) throw new Error('--out needs a directory');
const OUT = resolve(outIndex === -1 ? join(ROOT, 'release') : args[outIndex + 1]);

const readJson = (file) => JSON.parse(readFileSync(file, 'utf8'));
const writeJson = (file, value) => writeFileSync(file, `${JSON.stringify(value, null, 2)}\n`);
const rootPackage = readJson(join(ROOT, 'package.json'));

/** The service's packages and what of each runs; every other workspace (the client library) stays out. */
const SHIPPED = {
  'packages/core': ['dist/src'],
  'apps/api': ['dist/src'],
  'apps/dispatcher': ['dist/src'],
  // The CLI runs as one esbuild bundle (apps/cli/scripts/bundle.mjs) that bin/svc.js loads.
  'apps/cli': ['bin', 'dist/bundle/svc.cjs'],
};

for (const dir of Object.keys(SHIPPED)) {
  if (!existsSync(join(ROOT, dir, 'dist'))) throw new Error(`${dir}/dist is missing: run npm run build first`);
}
if (existsSync(OUT) && readdirSync(OUT).length > 0) {
  if (outIndex !== -1) throw new Error(`${OUT} is not empty`);
  rmSync(OUT, { recursive: true, force: true });
}
mkdirSync(OUT, { recursive: true });

/** JavaScript only: no .d.ts or .map (their sources are not shipped), and no test helpers. */
function copyCompiled(from, to) {
  cpSync(from, to, {
    recursive: true,
    filter: (source) => !/\.(d\.ts|map|tsbuildinfo|ts)$/.test(source) && !/\/dist\/src\/testing(\/|$)/.test(source),
  });
}

// 1. The repository's layout, with compiled code where the sources were: npm ci needs every
//    workspace's package.json beside the lockfile to install exactly what it pins.
cpSync(join(ROOT, 'package.json'), join(OUT, 'package.json'));
cpSync(join(ROOT, 'package-lock.json'), join(OUT, 'package-lock.json'));
for (const workspace of rootPackage.workspaces) {
  mkdirSync(join(OUT, workspace), { recursive: true });
  cpSync(join(ROOT, workspace, 'package.json'), join(OUT, workspace, 'package.json'));
  for (const part of SHIPPED[workspace] ?? []) copyCompiled(join(ROOT, workspace, part), join(OUT, workspace, part));
}
cpSync(join(ROOT, 'migrations'), join(OUT, 'migrations'), { recursive: true });
mkdirSync(join(OUT, 'scripts'));
for (const script of ['start-all.mjs', 'healthcheck.cjs']) cpSync(join(ROOT, 'scripts', script), join(OUT, 'scripts', script));
// The CLI bundle names a source map that is not shipped.
const bundle = join(OUT, 'apps/cli/dist/bundle/svc.cjs');
writeFileSync(bundle, readFileSync(bundle, 'utf8').replace(/\n\/\/# sourceMappingURL=\S+\s*$/, '\n'));

// 2. Production dependencies, from npm's cache when it has them (it does after `npm ci`). No
//    scripts: the root's `prepare` would build from sources that are not here.
execFileSync('npm', ['ci', '--omit=dev', '--ignore-scripts', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'], {
  cwd: OUT,
  stdio: ['ignore', 'ignore', 'inherit'],
});

// 3. What is not the service goes; each package.json says only what running needs.
for (const workspace of rootPackage.workspaces) {
  if (SHIPPED[workspace]) continue;
  const { name } = readJson(join(ROOT, workspace, 'package.json'));
  rmSync(join(OUT, workspace), { recursive: true, force: true });
  rmSync(join(OUT, 'node_modules', name), { recursive: true, force: true });
  const scope = join(OUT, 'node_modules', name.split('/')[0]);
  if (name.startsWith('@') && existsSync(scope) && readdirSync(scope).length === 0) rmSync(scope, { recursive: true });
}
for (const dir of Object.keys(SHIPPED)) {
  const manifest = readJson(join(ROOT, dir, 'package.json'));
  const exports = manifest.exports && Object.fromEntries(Object.entries(manifest.exports).filter(([key]) => !/testing|test-support/.test(key)));
  writeJson(join(OUT, dir, 'package.json'), {
    name: manifest.name,
    version: manifest.version,
    private: true,
    type: manifest.type,
    ...(exports ? { exports } : {}),
    ...(manifest.bin ? { bin: manifest.bin } : {}),
    dependencies: manifest.dependencies,
  });
}
rmSync(join(OUT, 'package-lock.json'));
writeJson(join(OUT, 'package.json'), {
  name: rootPackage.name,
  version: readJson(join(ROOT, 'apps/api/package.json')).version,
  description: 'Site Visibility Service: the v1 API, the webhook dispatcher and the svc operator command, ready to run',
  private: true,
  type: 'module',
  engines: rootPackage.engines,
  bin: { svc: 'apps/cli/bin/svc.js' },
  scripts: {
    migrate: 'node packages/core/dist/src/db/migrate.main.js',
    start: 'node scripts/start-all.mjs',
    'start:api': 'node apps/api/dist/src/main.js',
    'start:dispatcher': 'node apps/dispatcher/dist/src/main.js',
  },
});
writeFileSync(join(OUT, 'RELEASE'), `${gitDescribe()}\n`);
process.stdout.write(`release: ${OUT}\n`);

/** The commit the release was built from (SOURCE_COMMIT where there is no .git, as in an image build), so an operator can tell which one runs. */
function gitDescribe() {
  if (process.env.SOURCE_COMMIT) return process.env.SOURCE_COMMIT;
  try {
    return execFileSync('git', ['describe', '--always', '--dirty'], { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return 'unknown: built outside a git checkout';
  }
}
