import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import { buildIdOf, cacheFileFor, type CacheOutcome } from '../src/bundle/cached-script.js';
import { cacheDirsFor, warmRunName } from '../src/bundle/run-bundled.js';

/** The loader as the bin runs it (compiled beside this file's dist/test). */
const CACHED_SCRIPT = new URL('../src/bundle/cached-script.js', import.meta.url).href;

const work = mkdtempSync(join(tmpdir(), 'svc-code-cache-'));
afterAll(() => {
  rmSync(work, { recursive: true, force: true });
});

let dirCount = 0;
function freshDir(): string {
  return mkdtempSync(join(work, `d${dirCount++}-`));
}

/** A CommonJS bundle as bundle.mjs writes one: `//svc-build <hash>` first, then the code. */
function writeBundle(dir: string, body: string): { file: string; buildId: string } {
  const buildId = createHash('sha256').update(body).digest('hex').slice(0, 16);
  const file = join(dir, 'svc.cjs');
  writeFileSync(file, `//svc-build ${buildId}\n${body}`);
  return { file, buildId };
}

/** A result that says which code ran. */
const BODY = `
function fib(n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
module.exports.answer = (x) => fib(10) + x;
`;

interface Load {
  cache: CacheOutcome;
  warmedBy: string[];
  answer: number;
  /** The file saveAfter wrote, or null. */
  saved: string | null;
}

/**
 * Loads a bundle in a fresh process, as the bin does, then optionally saves after a run. A fresh
 * process each time: V8 keeps what it compiled in memory and would not even look at a cache for a
 * source it compiled before in the same process.
 */
function load(file: string, dirs: { readDirs: string[]; writeDirs: string[] }, saveAfter?: string, nodeFlags: string[] = []): Load {
  const probe = [
    `import { loadCachedScript } from ${JSON.stringify(CACHED_SCRIPT)};`,
    `const loaded = loadCachedScript(${JSON.stringify(file)}, ${JSON.stringify(dirs)});`,
    `const saved = ${saveAfter === undefined ? 'undefined' : `loaded.saveAfter(${JSON.stringify(saveAfter)})`};`,
    'console.log(JSON.stringify({ cache: loaded.cache, warmedBy: loaded.warmedBy, answer: loaded.exports.answer(1), saved: saved ?? null }));',
  ].join('\n');
  return JSON.parse(execFileSync(process.execPath, [...nodeFlags, '--input-type=module', '-e', probe], { encoding: 'utf8' })) as Load;
}

describe('a bundle run through the code cache', () => {
  it('runs without a cache, then writes one that the next load takes', () => {
    const dir = freshDir();
    const { file, buildId } = writeBundle(dir, BODY);
    const dirs = { readDirs: [dir], writeDirs: [dir] };

    expect(load(file, dirs, 'accounts.create')).toEqual({ cache: 'missing', warmedBy: [], answer: 56, saved: cacheFileFor(file, buildId, dir) });
    expect(load(file, dirs)).toEqual({ cache: 'accepted', warmedBy: ['accounts.create'], answer: 56, saved: null });
  });

  it('rewrites a cache only for a run it was not yet warmed by, keeping the earlier runs', () => {
    const dir = freshDir();
    const { file } = writeBundle(dir, BODY);
    const dirs = { readDirs: [dir], writeDirs: [dir] };
    load(file, dirs, 'build');

    expect(load(file, dirs, 'build').saved).toBeNull();
    expect(load(file, dirs, 'power-ups.deploy').saved).not.toBeNull();
    expect(load(file, dirs).warmedBy).toEqual(['build', 'power-ups.deploy']);
  });

  it('never offers V8 the cache of another build of the bundle', () => {
    const dir = freshDir();
    const old = writeBundle(dir, BODY);
    load(old.file, { readDirs: [dir], writeDirs: [dir] }, 'build');
    // A new build of the same length: V8's own check (the source's length) would take the old cache.
    const rebuilt = writeBundle(dir, BODY.replace('fib(10)', 'fib(11)'));
    expect(rebuilt.buildId).not.toBe(old.buildId);
    writeFileSync(cacheFileFor(rebuilt.file, rebuilt.buildId, dir), readFileSync(cacheFileFor(old.file, old.buildId, dir)));

    expect(load(rebuilt.file, { readDirs: [dir], writeDirs: [] })).toMatchObject({ cache: 'missing', answer: 90 });
  });

  it('compiles the source when V8 refuses a whole cache (one made for other code), and replaces it', () => {
    const dir = freshDir();
    const { file, buildId } = writeBundle(dir, BODY);
    const otherDir = freshDir();
    const other = writeBundle(otherDir, `${BODY}\nmodule.exports.more = () => 'other code, other length';\n`);
    load(other.file, { readDirs: [otherDir], writeDirs: [otherDir] }, 'build');
    // The other bundle's cache, whole (its checksum holds), filed under this bundle's build.
    const foreign = readFileSync(cacheFileFor(other.file, other.buildId, otherDir)).toString('latin1').replace(other.buildId, buildId);
    const cacheFile = cacheFileFor(file, buildId, dir);
    writeFileSync(cacheFile, Buffer.from(foreign, 'latin1'));

    expect(load(file, { readDirs: [dir], writeDirs: [dir] }, 'build')).toEqual({ cache: 'rejected', warmedBy: [], answer: 56, saved: cacheFile });
    expect(load(file, { readDirs: [dir], writeDirs: [] }).cache).toBe('accepted');
  });

  it('never offers V8 a cache whose bytes were damaged on disk (V8 would crash on it), and replaces it', () => {
    const dir = freshDir();
    // Enough code for a cache of some size, so that the damage lands inside V8's own data.
    const { file, buildId } = writeBundle(dir, `${BODY}\n${Array.from({ length: 200 }, (_, i) => `module.exports.f${i} = (x) => [x, ${i}].map(String).join('-');`).join('\n')}`);
    const cacheFile = cacheFileFor(file, buildId, dir);
    load(file, { readDirs: [dir], writeDirs: [dir] }, 'build');
    const damaged = readFileSync(cacheFile);
    const headerEnd = damaged.indexOf(10) + 1;
    for (const at of [0.25, 0.5, 0.75]) {
      const offset = headerEnd + Math.floor((damaged.length - headerEnd) * at);
      for (let i = 0; i < 16; i++) damaged[offset + i] = (damaged[offset + i] as number) ^ 0x55;
    }
    writeFileSync(cacheFile, damaged);

    expect(load(file, { readDirs: [dir], writeDirs: [dir] }, 'build')).toEqual({ cache: 'missing', warmedBy: [], answer: 56, saved: cacheFile });
    expect(load(file, { readDirs: [dir], writeDirs: [] }).cache).toBe('accepted');
  });

  it('treats a cache made by another Node, or a file that is not a cache, as missing', () => {
    const dir = freshDir();
    const { file, buildId } = writeBundle(dir, BODY);
    const cacheFile = cacheFileFor(file, buildId, dir);
    load(file, { readDirs: [dir], writeDirs: [dir] }, 'build');
    const otherNode = readFileSync(cacheFile).toString('latin1').replace(process.version, 'v99.0.0');
    writeFileSync(cacheFile, Buffer.from(otherNode, 'latin1'));
    expect(load(file, { readDirs: [dir], writeDirs: [] }).cache).toBe('missing');

    writeFileSync(cacheFile, 'not a cache at all');
    expect(load(file, { readDirs: [dir], writeDirs: [] }).cache).toBe('missing');
  });

  it('still runs when no directory can take a cache, and writes to the next one that can', () => {
    const dir = freshDir();
    const userCache = join(freshDir(), 'svc');
    const { file, buildId } = writeBundle(dir, BODY);
    // A path under a regular file can never be created, even by root (a read-only install).
    const unwritable = join(file, 'cannot-be-a-directory');

    expect(load(file, { readDirs: [unwritable], writeDirs: [unwritable] }, 'build')).toEqual({ cache: 'missing', warmedBy: [], answer: 56, saved: null });
    expect(load(file, { readDirs: [userCache, unwritable], writeDirs: [unwritable, userCache] }, 'build').saved).toBe(cacheFileFor(file, buildId, userCache));
    expect(load(file, { readDirs: [userCache, unwritable], writeDirs: [] }).cache).toBe('accepted');
    expect(readdirSync(userCache)).toEqual([`svc.cjs.${buildId}.${process.version}-${process.arch}.v8cache`]);
  });

  it('runs a file without a build line, never caching it', () => {
    const dir = freshDir();
    const file = join(dir, 'plain.cjs');
    writeFileSync(file, BODY);
    expect(buildIdOf(BODY)).toBeUndefined();

    expect(load(file, { readDirs: [dir], writeDirs: [dir] }, 'build')).toEqual({ cache: 'missing', warmedBy: [], answer: 56, saved: null });
    expect(readdirSync(dir)).toEqual(['plain.cjs']);
  });

  it('requires the bundle plainly, without a cache, under --enable-source-maps (Node maps only what it loads)', () => {
    const dir = freshDir();
    const { file } = writeBundle(dir, BODY);

    expect(load(file, { readDirs: [dir], writeDirs: [dir] }, 'build', ['--enable-source-maps'])).toEqual({ cache: 'missing', warmedBy: [], answer: 56, saved: null });
    expect(readdirSync(dir)).toEqual(['svc.cjs']);
  });
});

describe('what the bin caches by', () => {
  it('names a run by its command words only, never an option or a value', () => {
    expect(warmRunName(['accounts', 'create', '--name', 'Acme', '--json'])).toBe('accounts.create');
    expect(warmRunName(['power-ups', 'deploy', '--site', 'site_1'])).toBe('power-ups.deploy');
    expect(warmRunName(['scans', 'complete', 'scan_abc', '--score', '88'])).toBe('scans.complete');
    expect(warmRunName(['--help'])).toBe('svc');
    expect(warmRunName(['keys', 'Revoke'])).toBe('keys');
  });

  it('reads the user cache first and writes beside the bundles first; SVC_CODE_CACHE=off turns both off', () => {
    expect(cacheDirsFor({ XDG_CACHE_HOME: '/home/op/.cache' }, '/opt/svc/bundle/')).toEqual({
      readDirs: ['/home/op/.cache/svc', '/opt/svc/bundle/'],
      writeDirs: ['/opt/svc/bundle/', '/home/op/.cache/svc'],
    });
    expect(cacheDirsFor({ SVC_CODE_CACHE: 'off' })).toEqual({ readDirs: [], writeDirs: [] });
  });
});
