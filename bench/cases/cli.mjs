// Case 8: the CPU one `svc` command costs, start-up included, beside a bare `node -e 0` in the
// same run. CPU is user + system time of the waited-for child, read from this process's
// cutime/cstime in /proc (clock ticks, usually 10 ms: hence many samples and the median).
import { spawnSync } from 'node:child_process';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

const TICK_MS = (() => {
  try {
    return 1000 / Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());
  } catch {
    return 10;
  }
})();

/** CPU ms used so far by the children this process has waited for. */
function childrenCpuMs() {
  const fields = readFileSync('/proc/self/stat', 'utf8').split(') ')[1].split(' ');
  // After the ") ", field 3 (state) is index 0: cutime is field 16, cstime field 17.
  return (Number(fields[13]) + Number(fields[14])) * TICK_MS;
}

/** Runs `node args…` once and returns its CPU seconds; throws when it does not exit 0. */
function cpuOf(args, { cwd, env }) {
  const before = childrenCpuMs();
  const child = spawnSync(process.execPath, args, { cwd, env, encoding: 'utf8', timeout: 30_000 });
  const cpuMs = childrenCpuMs() - before;
  if (child.status !== 0) throw new Error(`node ${args.join(' ')} exited ${child.status}: ${child.stderr.slice(0, 300)}`);
  return cpuMs / 1000;
}

/**
 * The commands, interleaved sample by sample so that a burst of load elsewhere hits all of them:
 * a bare `node -e 0`; `svc accounts create` (Postgres only); `svc power-ups deploy` on a site
 * with one subscription (the producer's statement, then its first attempt announced with a
 * Postgres NOTIFY that the bench's dispatcher turns into a job: ADR 15; before it, the commands
 * that loaded ioredis and BullMQ to queue the job themselves); `accounts create` with the V8
 * code cache off (`SVC_CODE_CACHE=off`: what a command costs when its cache is missing or
 * refused, docs/adr/0012); and `accounts create`
 * through the unbundled entry the bin ran before (for the before/after). The bin's caches are
 * those `npm run build` made, grown by each command's first run (the first sample).
 */
export function cliRun({ root, env, siteId, samples }) {
  const bin = join(root, 'apps/cli/bin/svc.js');
  const unbundled = join(root, 'apps/cli/dist/src/main.js');
  const out = { node: [], dbCommand: [], redisCommand: [], noCache: [], unbundled: [] };
  for (let i = 0; i < samples; i++) {
    const tag = `${Date.now().toString(36)}-${i}`;
    out.node.push(cpuOf(['-e', '0'], { cwd: root, env }));
    out.dbCommand.push(cpuOf([bin, 'accounts', 'create', '--name', `bench cli ${tag}`, '--json'], { cwd: root, env }));
    out.redisCommand.push(cpuOf([bin, 'power-ups', 'deploy', '--site', siteId, '--power-up', `pu_bench_${i}`, '--json'], { cwd: root, env }));
    out.noCache.push(cpuOf([bin, 'accounts', 'create', '--name', `bench cli no cache ${tag}`, '--json'], { cwd: root, env: { ...env, SVC_CODE_CACHE: 'off' } }));
    out.unbundled.push(cpuOf([unbundled, 'accounts', 'create', '--name', `bench cli unbundled ${tag}`, '--json'], { cwd: root, env }));
  }
  return out;
}
