// Case 8: the CPU one `svc` command costs, start-up included, beside a bare `node -e 0` in the
// same run. CPU is user + system time of the child, to the millisecond: each sample runs under
// bash, whose `times` prints its children's rusage (getrusage, 1 ms steps). Before, the case read
// this process's cutime/cstime from /proc, in 10 ms clock ticks, so that a median of 0.153 s
// could print as 0.150 s and meet a target of 0.15 s that it missed.
import { spawnSync } from 'node:child_process';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { machineDelta, machineSnapshot } from '../lib/cpu.mjs';
import { sleep } from '../lib/stats.mjs';

const TICK_MS = (() => {
  try {
    return 1000 / Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());
  } catch {
    return 10;
  }
})();

/** CPU ms used so far by the children this process has waited for (clock ticks: for the machine's share only). */
function childrenCpuMs() {
  const fields = readFileSync('/proc/self/stat', 'utf8').split(') ')[1].split(' ');
  // After the ") ", field 3 (state) is index 0: cutime is field 16, cstime field 17.
  return (Number(fields[13]) + Number(fields[14])) * TICK_MS;
}

// Runs "$@", then writes bash's `times` (its own line, then its children's) on fd 3.
const UNDER_BASH = ['-c', '"$@"; status=$?; times >&3; exit $status', 'svc-bench'];
const TIMES_LINE = /^(\d+)m([\d.]+)s (\d+)m([\d.]+)s$/;

/** Runs `node args…` once and returns its CPU seconds (user + system); throws when it does not exit 0. */
function cpuOf(args, { cwd, env }) {
  const child = spawnSync('bash', [...UNDER_BASH, process.execPath, ...args], { cwd, env, encoding: 'utf8', timeout: 30_000, stdio: ['ignore', 'pipe', 'pipe', 'pipe'] });
  if (child.status !== 0) throw new Error(`node ${args.join(' ')} exited ${child.status}: ${String(child.stderr).slice(0, 300)}`);
  const children = TIMES_LINE.exec(String(child.output[3]).trim().split('\n')[1] ?? '');
  if (!children) throw new Error(`bash's times printed ${JSON.stringify(child.output[3])}`);
  const [, userMin, userSec, sysMin, sysSec] = children.map(Number);
  return userMin * 60 + userSec + sysMin * 60 + sysSec;
}

/**
 * The commands, interleaved sample by sample so that a burst of load elsewhere hits all of them:
 * a bare `node -e 0`; `svc accounts create` (Postgres only); `svc power-ups deploy` on a site
 * with one subscription (the producer's statement, then its first attempt queued in Redis through
 * BullMQ, as every producer does); and `accounts create` through the unbundled entry
 * (dist/src/main.js), the A/B that shows whether the bundle the bin runs still pays for itself.
 */
/**
 * Waits, up to `maxMs`, for a window of `windowMs` in which the whole machine keeps at most
 * `threshold` of a core busy: what runs on the other core slows a command's own CPU time (on this
 * 2-CPU VM, a busy loop on the other core made `node -e 0` 12 % and `svc accounts create` 10 %
 * dearer), and the cases before this one leave Postgres and the dispatcher with work to finish.
 * Returns what it waited and the last window's busy cores, which the report prints.
 */
export async function waitForQuietMachine({ maxMs = 30_000, windowMs = 1_000, threshold = 0.25 } = {}) {
  const started = performance.now();
  for (;;) {
    const before = machineSnapshot();
    await sleep(windowMs);
    const { busyCores } = machineDelta(before, machineSnapshot());
    const waitedMs = performance.now() - started;
    if (busyCores <= threshold || waitedMs >= maxMs) return { waitedMs, busyCores, quiet: busyCores <= threshold };
  }
}

export function cliRun({ root, env, siteId, samples }) {
  const bin = join(root, 'apps/cli/bin/svc.js');
  const unbundled = join(root, 'apps/cli/dist/src/main.js');
  const out = { node: [], dbCommand: [], redisCommand: [], unbundled: [] };
  const machineBefore = machineSnapshot();
  const childrenBefore = childrenCpuMs();
  for (let i = 0; i < samples; i++) {
    const tag = `${Date.now().toString(36)}-${i}`;
    out.node.push(cpuOf(['-e', '0'], { cwd: root, env }));
    out.dbCommand.push(cpuOf([bin, 'accounts', 'create', '--name', `bench cli ${tag}`, '--json'], { cwd: root, env }));
    out.redisCommand.push(cpuOf([bin, 'power-ups', 'deploy', '--site', siteId, '--power-up', `pu_bench_${i}`, '--json'], { cwd: root, env }));
    out.unbundled.push(cpuOf([unbundled, 'accounts', 'create', '--name', `bench cli unbundled ${tag}`, '--json'], { cwd: root, env }));
  }
  // The rest of the machine while the commands ran: every process's CPU but the commands' own
  // (the bench's dispatcher delivering the deploys' first attempts, Postgres, anyone else's).
  const machine = machineDelta(machineBefore, machineSnapshot());
  out.othersBusyCores = (machine.busyMs - (childrenCpuMs() - childrenBefore)) / machine.wallMs;
  return out;
}
