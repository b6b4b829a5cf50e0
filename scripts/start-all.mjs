// `npm start`: migrate, then run one API and one dispatcher in the foreground.
// SIGINT/SIGTERM are passed to both; this exits when both have stopped, with the worst exit code.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));

function run(name, script) {
  const child = spawn(process.execPath, [script], { cwd: root, stdio: 'inherit', env: process.env });
  return { name, child, exited: new Promise((resolve) => child.on('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0)))) };
}

const migrate = run('migrate', 'packages/core/dist/src/db/migrate.main.js');
const migrated = await migrate.exited;
if (migrated !== 0) process.exit(migrated);

const processes = [run('api', 'apps/api/dist/src/main.js'), run('dispatcher', 'apps/dispatcher/dist/src/main.js')];
let stopping = false;
const stopAll = (signal) => {
  if (stopping) return;
  stopping = true;
  for (const { child } of processes) if (child.exitCode === null) child.kill(signal);
};
process.on('SIGINT', () => stopAll('SIGINT'));
process.on('SIGTERM', () => stopAll('SIGTERM'));

// If one of them dies on its own, stop the other rather than run half a service.
const codes = await Promise.all(
  processes.map(({ exited }) =>
    exited.then((code) => {
      stopAll('SIGTERM');
      return code;
    }),
  ),
);
process.exit(Math.max(...codes));
