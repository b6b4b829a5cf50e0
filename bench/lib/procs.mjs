// Child processes of the benchmark: the service (spawned exactly as `npm run start:api` /
// `npm run start:dispatcher` run it), the baselines and the receiver. Every child is tracked so
// that it is stopped, by its own pid, whatever way the benchmark ends.
import { fork, spawn } from 'node:child_process';
import { createWriteStream, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { sleep } from './stats.mjs';

const children = new Set();

/** Sends SIGTERM to every child still running (by pid); used on exit paths. */
export function killAllChildren(signal = 'SIGTERM') {
  for (const child of children) {
    if (child.exitCode === null && child.signalCode === null) {
      try {
        process.kill(child.pid, signal);
      } catch {
        /* already gone */
      }
    }
  }
}

function track(child, name) {
  children.add(child);
  child.benchName = name;
  child.exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve(code ?? signal)));
  child.exited.then(() => children.delete(child));
  return child;
}

/**
 * Spawns `node <script>` with the given environment, stdout/stderr to <logDir>/<name>.log.
 * With cpuProfDir, the child writes a V8 CPU profile there when it exits.
 */
export function spawnNode(name, script, { env, logDir, cwd, cpuProfDir, nodeArgs = [] }) {
  const args = [...nodeArgs];
  if (cpuProfDir) args.push('--cpu-prof', `--cpu-prof-dir=${cpuProfDir}`, `--cpu-prof-name=${name}-${Date.now()}.cpuprofile`);
  const child = spawn(process.execPath, [...args, script], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  const log = createWriteStream(join(logDir, `${name}.log`), { flags: 'a' });
  child.stdout.pipe(log, { end: false });
  child.stderr.pipe(log, { end: false });
  child.logPath = join(logDir, `${name}.log`);
  return track(child, name);
}

/**
 * Spawns any other program the bench needs (a private redis-server), output to <logDir>/<name>.log,
 * tracked like the service's processes so that it is stopped by its pid whatever way the run ends.
 */
export function spawnProcess(name, command, args, { logDir, cwd }) {
  const child = spawn(command, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  const log = createWriteStream(join(logDir, `${name}.log`), { flags: 'a' });
  child.stdout.pipe(log, { end: false });
  child.stderr.pipe(log, { end: false });
  child.logPath = join(logDir, `${name}.log`);
  return track(child, name);
}

/** Forks a bench helper with an IPC channel; resolves once it sends {type:'ready'}. */
export async function forkHelper(name, script, { env, logDir, cwd, timeoutMs = 15_000 }) {
  const child = fork(script, [], { cwd, env, stdio: ['ignore', 'pipe', 'pipe', 'ipc'] });
  const log = createWriteStream(join(logDir, `${name}.log`), { flags: 'a' });
  child.stdout.pipe(log, { end: false });
  child.stderr.pipe(log, { end: false });
  child.logPath = join(logDir, `${name}.log`);
  track(child, name);
  let nextId = 1;
  const pending = new Map();
  let ready;
  const readyPromise = new Promise((resolve, reject) => {
    ready = resolve;
    setTimeout(() => reject(new Error(`${name} not ready after ${timeoutMs} ms (see ${child.logPath})`)), timeoutMs).unref();
    child.exited.then((code) => reject(new Error(`${name} exited (${code}) before ready (see ${child.logPath})`)));
  });
  child.on('message', (message) => {
    if (message?.type === 'ready') return ready(message);
    const waiter = pending.get(message?.id);
    if (waiter) {
      pending.delete(message.id);
      waiter(message);
    }
  });
  child.exited.then((code) => {
    for (const waiter of pending.values()) waiter({ error: `${name} exited (${code})` });
    pending.clear();
  });
  /** Sends a command and waits for its reply. */
  child.rpc = (cmd, args = {}) =>
    new Promise((resolve, reject) => {
      const id = nextId++;
      pending.set(id, (message) => (message.error ? reject(new Error(message.error)) : resolve(message)));
      child.send({ id, cmd, ...args });
    });
  const info = await readyPromise;
  return { child, info };
}

/** Polls url until it answers 200. */
export async function waitHttpOk(url, { timeoutMs = 30_000, child } = {}) {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  while (Date.now() < deadline) {
    if (child && (child.exitCode !== null || child.signalCode !== null)) {
      throw new Error(`${child.benchName} exited (${child.exitCode ?? child.signalCode}) before ${url} answered 200; see ${child.logPath}:\n${tail(child.logPath)}`);
    }
    try {
      const response = await fetch(url, { signal: AbortSignal.timeout(2_000) });
      if (response.status === 200) return;
      last = `status ${response.status}`;
    } catch (error) {
      last = error.message;
    }
    await sleep(100);
  }
  throw new Error(`${url} did not answer 200 within ${timeoutMs} ms (${last})`);
}

/** SIGTERM, then SIGKILL after graceMs; resolves with the exit code or signal. */
export async function stopChild(child, graceMs = 15_000) {
  if (!child || child.exitCode !== null || child.signalCode !== null) return child?.exitCode ?? child?.signalCode;
  try {
    process.kill(child.pid, 'SIGTERM');
  } catch {
    /* gone */
  }
  const timer = setTimeout(() => {
    try {
      process.kill(child.pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  }, graceMs);
  const code = await child.exited;
  clearTimeout(timer);
  return code;
}

/** VmRSS and VmHWM (peak) of a process in bytes, from /proc/<pid>/status. */
export function readMemory(pid) {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const field = (name) => {
      const match = new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status);
      return match ? Number(match[1]) * 1024 : NaN;
    };
    return { rss: field('VmRSS'), hwm: field('VmHWM') };
  } catch {
    return { rss: NaN, hwm: NaN };
  }
}

/** The last lines of a log file, for error messages. */
export function tail(path, lines = 20) {
  try {
    return readFileSync(path, 'utf8').split('\n').slice(-lines).join('\n');
  } catch {
    return '';
  }
}
