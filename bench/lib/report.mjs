// The benchmark's report: machine facts, one row per figure (median, min and max over the runs,
// the baseline, the ratio, the target and whether it is met), as Markdown and as JSON.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { summarizeRuns } from './stats.mjs';

export async function machineInfo({ db, redis, root }) {
  const pgVersion = (await db.raw('SHOW server_version')).rows[0].server_version;
  const redisVersion = /redis_version:(\S+)/.exec(await redis.info('server'))?.[1];
  let git = null;
  try {
    const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: root, encoding: 'utf8' }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], { cwd: root, encoding: 'utf8' }).trim() !== '';
    git = `${commit}${dirty ? ' (with uncommitted changes)' : ''}`;
  } catch {
    /* not a git checkout */
  }
  let loadavg = os.loadavg().map((v) => v.toFixed(2)).join(' ');
  let osName = `${os.type()} ${os.release()}`;
  try {
    osName = /PRETTY_NAME="([^"]+)"/.exec(readFileSync('/etc/os-release', 'utf8'))?.[1] + ` (kernel ${os.release()})`;
  } catch {
    /* keep the generic name */
  }
  return {
    date: new Date().toISOString(),
    nproc: os.availableParallelism?.() ?? os.cpus().length,
    cpu: os.cpus()[0]?.model ?? 'unknown',
    memoryGiB: +(os.totalmem() / 2 ** 30).toFixed(1),
    os: osName,
    node: process.version,
    postgres: pgVersion,
    redis: redisVersion,
    git,
    loadavgAtStart: loadavg,
  };
}

const fmt = {
  rps: (v) => (Number.isFinite(v) ? v.toFixed(0) : '–'),
  ms: (v) => (Number.isFinite(v) ? (Math.abs(v) < 10 ? v.toFixed(2) : v.toFixed(1)) : '–'),
  ms3: (v) => (Number.isFinite(v) ? v.toFixed(3) : '–'),
  pct: (v) => (Number.isFinite(v) ? `${(v * 100).toFixed(1)} %` : '–'),
  s: (v) => (Number.isFinite(v) ? v.toFixed(3) : '–'),
  bytes: (v) => (Number.isFinite(v) ? v.toFixed(0) : '–'),
  mib: (v) => (Number.isFinite(v) ? (v / 2 ** 20).toFixed(1) : '–'),
  ratio: (v) => (Number.isFinite(v) ? `${v.toFixed(2)}×` : '–'),
  count: (v) => (Number.isFinite(v) ? v.toFixed(0) : '–'),
  number: (v) => (Number.isFinite(v) ? v.toFixed(2) : '–'),
};

/**
 * rows: { case, figure, unit, format, svc: number[] (per run), baseline?: number[], ratio?:
 * number[] (per run, service ÷ baseline), target?: string, met?: (summaries) => boolean, note? }
 */
export function buildTable(rows) {
  return rows.map((row) => {
    const svc = summarizeRuns(row.svc);
    const baseline = row.baseline ? summarizeRuns(row.baseline) : null;
    const ratio = row.ratio ? summarizeRuns(row.ratio) : null;
    const met = row.met ? row.met({ svc, baseline, ratio }) : null;
    return { case: row.case, figure: row.figure, unit: row.unit, format: row.format, svc, baseline, ratio, target: row.target ?? null, met, note: row.note ?? null };
  });
}

export function toMarkdown(table, { machine, params, mode, notes = [] }) {
  const lines = [];
  lines.push(`# Benchmark results (${mode})`, '');
  lines.push(
    `${machine.date} · ${machine.nproc} CPUs (${machine.cpu}) · ${machine.memoryGiB} GiB · ${machine.os} · Node ${machine.node} · PostgreSQL ${machine.postgres} · Redis ${machine.redis}` +
      (machine.git ? ` · commit ${machine.git}` : '') +
      ` · load average at start ${machine.loadavgAtStart}`,
    '',
  );
  lines.push(
    `Runs per figure: ${params.runs}. Median, min and max are over the runs; the ratio is service ÷ baseline measured in the same run (median of the per-run ratios); "met" is judged on the medians.`,
    '',
  );
  lines.push('| # | Figure | Median | Min | Max | Baseline | Ratio | Target | Met |');
  lines.push('|---|---|---:|---:|---:|---:|---:|---|:---:|');
  for (const row of table) {
    const f = fmt[row.format] ?? fmt.ms;
    const unit = row.unit ? ` ${row.unit}` : '';
    lines.push(
      `| ${row.case} | ${row.figure}${row.note ? ` (${row.note})` : ''} | ${f(row.svc.median)}${unit} | ${f(row.svc.min)} | ${f(row.svc.max)} | ${row.baseline ? f(row.baseline.median) + unit : ''} | ${row.ratio ? fmt.ratio(row.ratio.median) : ''} | ${row.target ?? ''} | ${row.met === null ? '' : row.met ? 'yes' : '**no**'} |`,
    );
  }
  if (notes.length) {
    lines.push('', ...notes.map((note) => `- ${note}`));
  }
  return `${lines.join('\n')}\n`;
}
