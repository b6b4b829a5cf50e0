import { spawn, spawnSync, type ChildProcess, type SpawnSyncOptions } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository this file was compiled in (apps/dispatcher/dist/test/support/ → the root). */
export const REPO_ROOT = fileURLToPath(new URL('../../../../../', import.meta.url));

/** ops/previous-release: one line, the commit of the previous release and why it is that one. */
export const PREVIOUS_RELEASE_FILE = 'ops/previous-release';

/** The previous release's commit, as ops/previous-release names it. */
export function previousReleaseCommit(): string {
  const line = readFileSync(join(REPO_ROOT, PREVIOUS_RELEASE_FILE), 'utf8').trim();
  const sha = line.split(/\s+/)[0] ?? '';
  if (!/^[0-9a-f]{40}$/.test(sha)) throw new Error(`${PREVIOUS_RELEASE_FILE} must start with a full 40-character commit SHA (got "${sha}")`);
  return sha;
}

function run(command: string, args: string[], options: SpawnSyncOptions = {}): Buffer {
  const result = spawnSync(command, args, { maxBuffer: 512 * 1024 * 1024, ...options });
  if (result.error) throw new Error(`${command} ${args.join(' ')}: ${result.error.message}`);
  if (result.status !== 0) {
    const output = `${String(result.stdout ?? '')}${String(result.stderr ?? '')}`.trim();
    throw new Error(`${command} ${args.join(' ')} exited with ${result.status}: ${output}`);
  }
  return result.stdout as Buffer;
}

export interface PreviousRelease {
  sha: string;
  /** Where its sources were materialized and compiled (under os.tmpdir()). */
  dir: string;
  /** Its dispatcher's entry: `npm run start:dispatcher` of that release. */
  dispatcherMain: string;
  /** How long compiling it took. */
  buildMs: number;
  /** Where its dispatcher's `@svc/core` resolves to: its own, never the repository's. */
  coreEntry: string;
  cleanup(): void;
}

/**
 * The previous release's dispatcher, compiled from git history without touching the work tree:
 * `git archive` of its packages/core and apps/dispatcher into a temporary directory, a
 * node_modules of symlinks to the repository's installed packages (its dependencies' versions are
 * the lockfile's then and now) except `@svc`, whose two packages are that release's own, and the
 * repository's TypeScript compiling their src (not their tests, which may need what is not
 * materialized). Throws one line when the commit is not in this clone (a shallow one).
 */
export function buildPreviousRelease(sha = previousReleaseCommit()): PreviousRelease {
  const present = spawnSync('git', ['-C', REPO_ROOT, 'cat-file', '-e', `${sha}^{commit}`], { encoding: 'utf8' });
  if (present.error || present.status !== 0) {
    // git's own words too, in case it is not the history that is missing (no git, not a repository).
    const said = (present.error?.message ?? present.stderr ?? '').trim().replace(/\s+/g, ' ');
    throw new Error(`the previous release's commit ${sha} (${PREVIOUS_RELEASE_FILE}) is not in this clone: this test needs the full git history (git fetch --unshallow)${said ? ` [git: ${said}]` : ''}`);
  }
  // The real path: Node resolves symlinks to real paths, and the check below compares with them.
  const dir = realpathSync(mkdtempSync(join(tmpdir(), 'svc-previous-release-')));
  try {
    const archive = run('git', ['-C', REPO_ROOT, 'archive', '--format=tar', sha, 'packages/core', 'apps/dispatcher', 'tsconfig.base.json', 'package.json']);
    run('tar', ['-x', '-C', dir], { input: archive });

    const modules = join(dir, 'node_modules');
    mkdirSync(join(modules, '@svc'), { recursive: true });
    for (const name of readdirSync(join(REPO_ROOT, 'node_modules'))) {
      if (name === '@svc' || name.startsWith('.')) continue;
      symlinkSync(join(REPO_ROOT, 'node_modules', name), join(modules, name));
    }
    symlinkSync(join(dir, 'packages/core'), join(modules, '@svc/core'), 'dir');
    symlinkSync(join(dir, 'apps/dispatcher'), join(modules, '@svc/dispatcher'), 'dir');

    const core = join(dir, 'packages/core/tsconfig.previous-release.json');
    const dispatcher = join(dir, 'apps/dispatcher/tsconfig.previous-release.json');
    writeFileSync(core, JSON.stringify({ extends: './tsconfig.json', include: ['src'], references: [] }));
    writeFileSync(dispatcher, JSON.stringify({ extends: './tsconfig.json', include: ['src'], references: [{ path: '../../packages/core/tsconfig.previous-release.json' }] }));
    const started = Date.now();
    run(process.execPath, [join(REPO_ROOT, 'node_modules/typescript/bin/tsc'), '-b', core, dispatcher]);
    const buildMs = Date.now() - started;

    const resolved = run(process.execPath, ['--input-type=module', '-e', "console.log(import.meta.resolve('@svc/core'))"], { cwd: join(dir, 'apps/dispatcher') });
    const coreEntry = realpathSync(fileURLToPath(resolved.toString('utf8').trim()));
    if (!coreEntry.startsWith(`${dir}/packages/core/`)) throw new Error(`the previous release's dispatcher would load @svc/core from ${coreEntry}, not its own`);
    return {
      sha,
      dir,
      dispatcherMain: join(dir, 'apps/dispatcher/dist/src/main.js'),
      buildMs,
      coreEntry,
      cleanup: () => rmSync(dir, { recursive: true, force: true }),
    };
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
}

/** One JSON log line of a dispatcher process. */
export interface LogLine {
  level: string;
  message: string;
  [field: string]: unknown;
}

export interface DispatcherProcess {
  child: ChildProcess;
  exited: Promise<number | null>;
  /** Everything it wrote on stdout and stderr. */
  output(): string;
  /** What it wrote on stderr alone. */
  stderr(): string;
  /** Its stdout's JSON log lines (and any other line, as level "unparsed"). */
  logLines(): LogLine[];
  /** SIGTERM, then waits for it to exit (SIGKILL after `graceMs`); its exit code. */
  stop(graceMs?: number): Promise<number | null>;
}

/** Runs a dispatcher entry (main.js) as a process of its own with exactly this environment (and PATH). */
export function startDispatcherProcess(main: string, env: Record<string, string>): DispatcherProcess {
  let stdout = '';
  let stderr = '';
  const child = spawn(process.execPath, [main], { env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  let exitCode: number | null | undefined;
  const exited = new Promise<number | null>((resolve) =>
    child.on('exit', (code, signal) => {
      exitCode = code ?? (signal ? 128 : null);
      resolve(exitCode);
    }),
  );
  return {
    child,
    exited,
    output: () => `${stdout}${stderr}`,
    stderr: () => stderr,
    logLines: () =>
      stdout
        .split('\n')
        .filter((line) => line.trim() !== '')
        .map((line) => {
          try {
            return JSON.parse(line) as LogLine;
          } catch {
            return { level: 'unparsed', message: line };
          }
        }),
    async stop(graceMs = 20_000) {
      if (exitCode !== undefined) return exitCode;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      try {
        return await exited;
      } finally {
        clearTimeout(timer);
      }
    },
  };
}
