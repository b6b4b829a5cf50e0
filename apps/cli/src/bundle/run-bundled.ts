import { homedir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { CliOptions } from '../run-cli.js';
import { loadCachedScript, type CachedScriptOptions, type LoadedScript } from './cached-script.js';

/**
 * What bin/svc.js runs: the CLI's two CommonJS bundles (apps/cli/scripts/bundle.mjs), each
 * through a V8 code cache (cached-script.ts). `svc.cjs` is the whole CLI except BullMQ and
 * ioredis, which sit in `redis-libs.cjs`, loaded only when a command first touches them.
 */

/** The bundles: dist/bundle, beside dist/src where this file is compiled to. */
export const BUNDLE_DIR = fileURLToPath(new URL('../../bundle/', import.meta.url));
export const MAIN_BUNDLE = 'svc.cjs';
export const REDIS_LIBS_BUNDLE = 'redis-libs.cjs';
/**
 * The global symbol (`Symbol.for`) under which the main bundle's stand-ins for BullMQ and ioredis
 * find the loader of redis-libs.cjs (bundle.mjs writes them).
 */
export const REDIS_LIBS_LOADER = 'svc.loadRedisLibs';
/** What the build's caches are warmed by (writeBuildCaches). */
export const BUILD_WARM_RUN = 'build';

type RunCli = (argv: readonly string[], options?: CliOptions) => Promise<number>;
type Env = Record<string, string | undefined>;
type CacheDirs = Pick<CachedScriptOptions, 'readDirs' | 'writeDirs'>;

/**
 * Where caches are read and written. The build writes its caches beside the bundles; a command
 * writes there too when it can, else in the user's cache directory (an install whose bundle
 * directory is read-only), which is therefore read first. `SVC_CODE_CACHE=off` turns caching off:
 * every run compiles and nothing is written.
 */
export function cacheDirsFor(env: Env, bundleDir = BUNDLE_DIR): CacheDirs {
  if (env.SVC_CODE_CACHE === 'off') return { readDirs: [], writeDirs: [] };
  const userCache = userCacheDir(env);
  return userCache ? { readDirs: [userCache, bundleDir], writeDirs: [bundleDir, userCache] } : { readDirs: [bundleDir], writeDirs: [bundleDir] };
}

/** $XDG_CACHE_HOME/svc, else ~/.cache/svc; none for a user without a home directory. */
function userCacheDir(env: Env): string | undefined {
  if (env.XDG_CACHE_HOME?.startsWith('/')) return join(env.XDG_CACHE_HOME, 'svc');
  try {
    return join(homedir(), '.cache', 'svc');
  } catch {
    return undefined;
  }
}

export interface LoadedCli {
  runCli: RunCli;
  /** Every bundle loaded so far, main first. */
  scripts: Array<LoadedScript<unknown>>;
  /** Loads redis-libs.cjs (once), as the main bundle does on the first use of BullMQ or ioredis. */
  loadRedisLibs(): unknown;
}

/** Loads the main bundle; redis-libs.cjs is loaded on the first use of BullMQ or ioredis. */
export function loadBundledCli(cacheDirs: CacheDirs, bundleDir = BUNDLE_DIR): LoadedCli {
  const scripts: Array<LoadedScript<unknown>> = [];
  let redisLibs: unknown;
  const loadRedisLibs = () => {
    if (redisLibs === undefined) {
      const libs = loadCachedScript(join(bundleDir, REDIS_LIBS_BUNDLE), cacheDirs);
      scripts.push(libs);
      redisLibs = libs.exports;
    }
    return redisLibs;
  };
  (globalThis as Record<symbol, unknown>)[Symbol.for(REDIS_LIBS_LOADER)] = loadRedisLibs;
  const main = loadCachedScript<{ runCli: RunCli }>(join(bundleDir, MAIN_BUNDLE), cacheDirs);
  scripts.unshift(main);
  return { runCli: main.exports.runCli, scripts, loadRedisLibs };
}

/** The name a run warms a cache by: its command words (`accounts.create`), never an option or a value. */
export function warmRunName(argv: readonly string[]): string {
  const words: string[] = [];
  for (const arg of argv) {
    if (words.length === 2 || !/^[a-z][a-z-]*$/.test(arg)) break;
    words.push(arg);
  }
  return words.length ? words.join('.') : 'svc';
}

/**
 * Runs one command from the bundles and resolves to its exit code. After a command that succeeded
 * for the first time on this install, the caches are written again, holding what it compiled.
 */
export async function runBundledCli(argv: readonly string[], env: Env = process.env): Promise<number> {
  const cli = loadBundledCli(cacheDirsFor(env));
  const code = await cli.runCli(argv);
  if (code === 0) {
    const run = warmRunName(argv);
    for (const script of cli.scripts) script.saveAfter(run);
  }
  return code;
}

/**
 * For the build: loads both bundles, runs `svc --help` (which registers every command) with its
 * output discarded, and writes the caches beside the bundles.
 */
export async function writeBuildCaches(bundleDir = BUNDLE_DIR): Promise<string[]> {
  const cli = loadBundledCli({ readDirs: [], writeDirs: [bundleDir] }, bundleDir);
  const discard = { write: () => true };
  await cli.runCli(['--help'], { env: {}, stdout: discard, stderr: discard });
  // As a command that touches Redis would, so that redis-libs.cjs has a cache too.
  cli.loadRedisLibs();
  return cli.scripts.map((script) => script.saveAfter(BUILD_WARM_RUN)).filter((file): file is string => file !== undefined);
}
