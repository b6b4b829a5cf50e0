import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from '@svc/core';
import { freePort, requireSystemCommand, waitFor } from '@svc/core/testing';

export const SENTINEL_MASTER_NAME = 'svc-test-master';

/** Every process a test started, by PID, so they can be killed even if the test dies first. */
const started = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of started) if (child.exitCode === null && child.pid) process.kill(child.pid, 'SIGKILL');
});

/** Starts a process of ours; it is killed by PID in stop(), or when the test process exits. */
export function startOwned(command: string, args: string[], env?: NodeJS.ProcessEnv): ChildProcess & { output: () => string } {
  requireSystemCommand(command, command, 'a test starts its own Redis and Sentinel processes');
  let output = '';
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], ...(env ? { env } : {}) });
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  started.add(child);
  child.on('exit', () => started.delete(child));
  return Object.assign(child, { output: () => output });
}

/** Kills, by PID, every process startOwned started that still runs. */
export async function killAllOwned(): Promise<void> {
  await Promise.all([...started].map((child) => killOwned(child)));
}

/** Kills one process by its PID and waits for it to be gone. */
export async function killOwned(child: ChildProcess, signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null || !child.pid) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  process.kill(child.pid, signal);
  await exited;
}

async function ask<T>(port: number, run: (redis: Redis) => Promise<T>): Promise<T> {
  const redis = new Redis({ host: '127.0.0.1', port, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  redis.on('error', () => undefined);
  try {
    await redis.connect();
    return await run(redis);
  } finally {
    redis.disconnect();
  }
}

/**
 * A Redis master, one replica and three sentinels on free loopback ports, each a redis-server
 * process of this test (sentinels run as `redis-server <conf> --sentinel`). Small down-after and
 * failover timeouts so a failover takes a few seconds.
 */
export class SentinelCluster {
  masterPort = 0;
  replicaPort = 0;
  sentinelPorts: number[] = [];
  master!: ChildProcess;
  private readonly processes: ChildProcess[] = [];
  private readonly dir = mkdtempSync(join(tmpdir(), 'svc-sentinel-'));

  /** `host:port,…` for REDIS_SENTINELS. */
  get sentinels(): string {
    return this.sentinelPorts.map((port) => `127.0.0.1:${port}`).join(',');
  }

  async start(): Promise<this> {
    this.masterPort = await freePort();
    this.replicaPort = await freePort();
    const common = ['--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', this.dir];
    this.master = this.own(startOwned('redis-server', ['--port', String(this.masterPort), ...common]));
    this.own(startOwned('redis-server', ['--port', String(this.replicaPort), ...common, '--replicaof', '127.0.0.1', String(this.masterPort)]));
    await waitFor(
      () => ask(this.replicaPort, async (r) => (await r.info('replication')).includes('master_link_status:up')),
      15_000,
      'the replica to sync with the master',
    );
    for (let i = 0; i < 3; i++) {
      const port = await freePort();
      const conf = join(this.dir, `sentinel-${port}.conf`);
      writeFileSync(
        conf,
        [
          `port ${port}`,
          'bind 127.0.0.1',
          `dir ${this.dir}`,
          `sentinel monitor ${SENTINEL_MASTER_NAME} 127.0.0.1 ${this.masterPort} 2`,
          `sentinel down-after-milliseconds ${SENTINEL_MASTER_NAME} 1000`,
          `sentinel failover-timeout ${SENTINEL_MASTER_NAME} 3000`,
          `sentinel parallel-syncs ${SENTINEL_MASTER_NAME} 1`,
          '',
        ].join('\n'),
      );
      this.own(startOwned('redis-server', [conf, '--sentinel']));
      this.sentinelPorts.push(port);
    }
    // A failover needs each sentinel to know the replica and the two other sentinels.
    await waitFor(
      async () => {
        for (const port of this.sentinelPorts) {
          const info = await ask(port, (r) => r.call('SENTINEL', 'MASTER', SENTINEL_MASTER_NAME) as Promise<string[]>);
          const field = (name: string) => Number(info[info.indexOf(name) + 1]);
          if (field('num-slaves') !== 1 || field('num-other-sentinels') !== 2) return false;
        }
        return true;
      },
      20_000,
      'the sentinels to know the replica and each other',
    );
    return this;
  }

  /** The master's port as the sentinels report it now. */
  async masterPortNow(): Promise<number> {
    const [, port] = await ask(this.sentinelPorts[0]!, (r) => r.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', SENTINEL_MASTER_NAME) as Promise<string[]>);
    return Number(port);
  }

  /** A plain connection to one node (to look at its keys). */
  async onNode<T>(port: number, run: (redis: Redis) => Promise<T>): Promise<T> {
    return ask(port, run);
  }

  /** Kills every process it started, by PID, and removes its files. */
  async stop(): Promise<void> {
    await Promise.all(this.processes.map((child) => killOwned(child)));
    rmSync(this.dir, { recursive: true, force: true });
  }

  private own<T extends ChildProcess>(child: T): T {
    this.processes.push(child);
    return child;
  }
}
