import { spawnSync } from 'node:child_process';

const present = new Map<string, boolean>();

/**
 * For a test that starts a program of the machine's (openssl, redis-server, promtool, chromium):
 * when it is not installed, the test fails with one line naming the Debian package that provides
 * it, instead of a spawn error deep in a stack. README lists the same packages.
 */
export function requireSystemCommand(command: string, debianPackage: string, purpose: string): void {
  if (!present.has(command)) present.set(command, spawnSync(command, ['--version'], { stdio: 'ignore', timeout: 10_000 }).error === undefined);
  if (!present.get(command)) throw new Error(`${command} is missing (${purpose}): apt-get install -y ${debianPackage}`);
}
