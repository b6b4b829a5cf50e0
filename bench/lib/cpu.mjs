// CPU time per process from /proc, to say where a case's time goes across processes
// (the dispatcher, Postgres backends, Redis, the receiver, the publisher).
import { readdirSync, readFileSync } from 'node:fs';

const TICK_MS = 10; // USER_HZ is 100 on Linux

function readStat(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const close = stat.lastIndexOf(')');
    const comm = stat.slice(stat.indexOf('(') + 1, close);
    const fields = stat.slice(close + 2).split(' ');
    return { comm, ms: (Number(fields[11]) + Number(fields[12])) * TICK_MS };
  } catch {
    return null;
  }
}

let ownDatabase;

/**
 * Names the bench's database: Postgres backends serving other databases (other people's tests
 * on a shared machine) are then counted apart, as `postgres-other`, and left out of per-delivery
 * totals. Background processes (WAL writer, checkpointer…) serve every database and stay in `postgres`.
 */
export function setOwnDatabase(name) {
  ownDatabase = name;
}

function postgresGroup(pid) {
  if (!ownDatabase) return 'postgres';
  let title = '';
  try {
    title = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
  } catch {
    return 'postgres';
  }
  const backend = /^postgres: (?:\S+: )?\S+ (\S+) (\[local\]|\S+\(\d+\))/.exec(title) ?? /^postgres: (?:\S+: )?autovacuum worker (\S+)/.exec(title);
  if (!backend) return 'postgres';
  return backend[1] === ownDatabase ? 'postgres' : 'postgres-other';
}

/**
 * A snapshot of CPU ms per pid: the named pids, plus every process whose command is
 * `postgres` or `redis-server` (shared with anyone else on the machine: an upper bound).
 */
export function cpuSnapshot(named) {
  const pids = new Map();
  for (const [name, pid] of Object.entries(named)) {
    const stat = pid ? readStat(pid) : null;
    if (stat) pids.set(String(pid), { group: name, ms: stat.ms });
  }
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || pids.has(entry)) continue;
    const stat = readStat(entry);
    if (stat?.comm === 'postgres') pids.set(entry, { group: postgresGroup(entry), ms: stat.ms });
    else if (stat?.comm === 'redis-server') pids.set(entry, { group: 'redis', ms: stat.ms });
  }
  return { at: performance.now(), pids };
}

/** CPU ms per group between two snapshots (a process born in between counts from zero), and the wall ms. */
export function cpuDelta(before, after) {
  const out = { wallMs: after.at - before.at };
  for (const [pid, { group, ms }] of after.pids) {
    out[group] = (out[group] ?? 0) + ms - (before.pids.get(pid)?.ms ?? 0);
  }
  return out;
}

export function formatCpu(delta, per = 1, unit = '') {
  return Object.entries(delta)
    .filter(([k]) => k !== 'wallMs')
    .sort((a, b) => b[1] - a[1])
    .map(([k, v]) => `${k} ${(v / per).toFixed(per === 1 ? 0 : 2)}${unit}`)
    .join(', ');
}

/** The whole machine's CPU from /proc/stat (every process, ours and everyone else's), in ms. */
export function machineSnapshot() {
  const [, ...fields] = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/);
  const [user, nice, system, idle, iowait, irq, softirq, steal] = fields.map(Number);
  // Steal is CPU the hypervisor gave to other guests, not work of any process here: apart.
  const busy = user + nice + system + irq + softirq;
  return { at: performance.now(), busyMs: busy * TICK_MS, idleMs: (idle + iowait) * TICK_MS, stealMs: steal * TICK_MS };
}

/**
 * The share of the machine's CPU time the hypervisor gave to others between two snapshots
 * (`steal` in /proc/stat, over wall time × cores): on a shared VM, what no process of ours could use.
 */
export function stealShare(before, after, cores) {
  return (after.stealMs - before.stealMs) / ((after.at - before.at) * cores);
}

/** Between two machine snapshots: busy CPU ms, the wall ms, and the cores kept busy on average. */
export function machineDelta(before, after) {
  const wallMs = after.at - before.at;
  const busyMs = after.busyMs - before.busyMs;
  return { wallMs, busyMs, busyCores: busyMs / wallMs, stealCores: (after.stealMs - before.stealMs) / wallMs };
}
