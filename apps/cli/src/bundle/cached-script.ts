import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { basename, dirname, join } from 'node:path';
import { Script } from 'node:vm';

/**
 * Runs a CommonJS bundle (apps/cli/scripts/bundle.mjs) through node:vm with a V8 code cache, so
 * that a command does not parse and compile half a megabyte of JavaScript on every start. See
 * docs/adr/0012-cli-code-cache.md.
 *
 * The cache is an optimisation only: a cache that is missing, unreadable, made for another build
 * of the bundle, or refused by V8 (another Node version, other V8 flags, corrupt data) just means
 * a normal compile; writing a fresh one is best effort and never fails the command.
 */

/** First line of every bundle: `//svc-build <id>`, the id being a hash of the rest (bundle.mjs). */
const BUILD_LINE = /^\/\/svc-build ([0-9a-f]{16,64})\n/;

/**
 * A cache holds what V8 had compiled when it was made, so it is made after something ran: the
 * build's warm-up (`svc --help`, which registers every command), then each command the first time
 * it succeeds, over the cache it started from. Its header lists those runs ("warmed by"), so that
 * the cache of an install grows to hold every command an operator uses and is then left alone.
 */
const WARM_RUN = /^[a-z0-9.-]+$/;

/**
 * A cache file starts with this line, then V8's data. The Node version and architecture are in it
 * (and in the file's name) so that a cache made by another Node is never even offered to V8: the
 * search goes on to the next directory instead. So is a SHA-1 of the data: V8 checks a cache's
 * version, flags and length but not its bytes (outside debug builds), and crashes the process on
 * a damaged one, so a cache whose bytes do not match is never offered to it either.
 */
function headerFor(buildId: string, data: Buffer, warmedBy: readonly string[]): string {
  return `${headerStart(buildId)}${digest(data)} ${warmedBy.join(',')}\n`;
}

function headerStart(buildId: string): string {
  return `svc-v8-cache 2 ${buildId} ${process.version} ${process.arch} `;
}

function digest(data: Buffer): string {
  return createHash('sha1').update(data).digest('hex');
}

export type CacheOutcome =
  /** V8 took the cache: nothing was parsed. */
  | 'accepted'
  /** V8 refused the cache (other V8 flags, corrupt data) and compiled the source. */
  | 'rejected'
  /** No cache for this build and this Node was found (or caching is off): the source was compiled. */
  | 'missing';

export interface CachedScriptOptions {
  /** Where a cache is looked for, in this order. Empty: caching is off. */
  readDirs: readonly string[];
  /** Where a fresh cache is written: the first directory that takes it. */
  writeDirs: readonly string[];
}

export interface LoadedScript<T> {
  exports: T;
  cache: CacheOutcome;
  /** The runs the cache V8 took was warmed by (empty when it took none). */
  warmedBy: readonly string[];
  /**
   * After `run` (a name such as `accounts.create`) succeeded: unless the cache V8 took was
   * already warmed by it, writes one warmed by it too, now that the functions it used are
   * compiled. Returns the file written, or undefined (nothing to do, or no directory took it).
   */
  saveAfter(run: string): string | undefined;
}

/** The build id a bundle names on its first line, or undefined for a file without one. */
export function buildIdOf(source: string): string | undefined {
  return BUILD_LINE.exec(source)?.[1];
}

/** The cache file of a bundle in a directory: named after the bundle, its build and this Node. */
export function cacheFileFor(bundleFile: string, buildId: string, dir: string): string {
  return join(dir, `${basename(bundleFile)}.${buildId}.${process.version}-${process.arch}.v8cache`);
}

/** The V8 data of a cache file and the runs that warmed it, if it is whole and belongs to this build and this Node. */
function readCache(file: string, buildId: string): { data: Buffer; warmedBy: string[] } | undefined {
  let raw: Buffer;
  try {
    raw = readFileSync(file);
  } catch {
    return undefined;
  }
  const start = headerStart(buildId);
  const end = raw.indexOf(10); // the header's newline
  if (end < start.length || raw.toString('latin1', 0, start.length) !== start) return undefined;
  const [sha1, runs = ''] = raw.toString('latin1', start.length, end).split(' ');
  const warmedBy = runs.split(',');
  if (!warmedBy.every((run) => WARM_RUN.test(run))) return undefined;
  const data = raw.subarray(end + 1);
  return digest(data) === sha1 ? { data, warmedBy } : undefined;
}

/** Writes a cache file atomically (a reader never sees half of one); undefined if the directory refuses. */
function writeCache(file: string, header: string, data: Buffer): string | undefined {
  const temporary = `${file}.${process.pid}.tmp`;
  try {
    mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
    writeFileSync(temporary, Buffer.concat([Buffer.from(header, 'latin1'), data]), { mode: 0o644 });
    renameSync(temporary, file);
    return file;
  } catch {
    try {
      rmSync(temporary, { force: true });
    } catch {
      // Nothing was written where nothing can be.
    }
    return undefined;
  }
}

/**
 * Compiles and runs a CommonJS bundle, with the first cache of its build found in
 * `options.readDirs`, and returns its exports. Under `node --enable-source-maps` the bundle is
 * required as any module, without a cache: Node maps stack traces back to the sources only for
 * modules it loads itself.
 */
export function loadCachedScript<T>(bundleFile: string, options: CachedScriptOptions): LoadedScript<T> {
  if (process.sourceMapsEnabled) {
    return { exports: createRequire(bundleFile)(bundleFile) as T, cache: 'missing', warmedBy: [], saveAfter: () => undefined };
  }
  const source = readFileSync(bundleFile, 'utf8');
  const buildId = buildIdOf(source);
  let found: { data: Buffer; warmedBy: string[] } | undefined;
  if (buildId !== undefined) {
    for (const dir of options.readDirs) {
      found = readCache(cacheFileFor(bundleFile, buildId, dir), buildId);
      if (found) break;
    }
  }
  // The wrapper Node gives a CommonJS module, so that the bundle runs as it would if required.
  const wrapper = `(function (exports, require, module, __filename, __dirname) {${source}\n})`;
  const script = new Script(wrapper, { filename: bundleFile, ...(found ? { cachedData: found.data } : {}) });
  const cache: CacheOutcome = found === undefined ? 'missing' : script.cachedDataRejected ? 'rejected' : 'accepted';
  const module = { exports: {} as T };
  const run = script.runInThisContext() as (...args: unknown[]) => void;
  run(module.exports, createRequire(bundleFile), module, bundleFile, dirname(bundleFile));

  const warmedBy = cache === 'accepted' && found ? found.warmedBy : [];
  const saveAfter = (run: string): string | undefined => {
    if (buildId === undefined || options.writeDirs.length === 0 || !WARM_RUN.test(run) || warmedBy.includes(run)) return undefined;
    const data = script.createCachedData();
    const header = headerFor(buildId, data, [...warmedBy, run]);
    for (const dir of options.writeDirs) {
      const written = writeCache(cacheFileFor(bundleFile, buildId, dir), header, data);
      if (written) return written;
    }
    return undefined;
  };
  return { exports: module.exports, cache, warmedBy, saveAfter };
}
