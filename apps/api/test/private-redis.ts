import { spawn, type ChildProcess } from 'node:child_process';
import { createRedis, type Redis } from '@svc/core';
import { freePort, requireSystemCommand, waitFor } from '@svc/core/testing';

/** A Redis server of the test's own on a free loopback port (never the shared one), stopped by its PID. */
export interface PrivateRedis {
  url: string;
  admin: Redis;
  stop(): Promise<void>;
}

export async function startPrivateRedis(): Promise<PrivateRedis> {
  requireSystemCommand('redis-server', 'redis-server', 'a test starts a Redis of its own');
  const port = await freePort();
  const child: ChildProcess = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
    stdio: 'ignore',
  });
  const url = `redis://127.0.0.1:${port}`;
  const admin = createRedis(url, 'fast-fail');
  admin.on('error', () => undefined);
  const up = await waitFor(async () => (await admin.ping().catch(() => undefined)) === 'PONG', 10_000, 'the private Redis');
  if (!up) throw new Error('private Redis did not start');
  return {
    url,
    admin,
    async stop() {
      admin.disconnect();
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.kill('SIGTERM');
      await exited;
    },
  };
}
