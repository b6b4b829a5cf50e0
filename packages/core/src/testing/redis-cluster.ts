import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { requireSystemCommand } from './system-commands.js';

/** Every node a test started, so they are killed by PID even if the test dies first. */
const started = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of started) if (child.exitCode === null && child.pid) process.kill(child.pid, 'SIGKILL');
});

/** One redis-server of a test cluster. */
export interface ClusterNode {
  port: number;
  /** The cluster bus port (`cluster-port`), chosen free rather than port + 10000. */
  busPort: number;
  process: ChildProcess;
}

/** Asks one node something over a connection of its own, closed afterwards. */
export async function askNode<T>(port: number, run: (redis: Redis) => Promise<T>): Promise<T> {
  const redis = new Redis({ host: '127.0.0.1', port, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: 1_000 });
  redis.on('error', () => undefined);
  try {
    await redis.connect();
    return await run(redis);
  } finally {
    // A connection that failed has ended: disconnecting it again would arm ioredis's 2 s stream-destroy timer, outliving the test.
    if (redis.status !== 'end') redis.disconnect();
  }
}

/**
 * A real Redis Cluster on loopback for a test: `masters` masters with one replica each, every node
 * a redis-server process of this test (`--cluster-enabled yes`), joined by `redis-cli --cluster
 * create … --cluster-replicas 1 --cluster-yes`, stopped by PID. A 1 s node timeout, so a killed
 * master's replica takes over within a few seconds.
 */
export class TestRedisCluster {
  readonly nodes: ClusterNode[] = [];
  private readonly dir = mkdtempSync(join(tmpdir(), 'svc-redis-cluster-'));

  constructor(private readonly masters = 3) {}

  /** `host:port,…` of every node, for REDIS_CLUSTER_NODES. */
  get seeds(): string {
    return this.nodes.map((node) => `127.0.0.1:${node.port}`).join(',');
  }

  async start(): Promise<this> {
    requireSystemCommand('redis-server', 'redis-server', 'a test starts its own Redis Cluster');
    requireSystemCommand('redis-cli', 'redis-tools', 'a test joins its Redis Cluster with redis-cli --cluster create');
    const ports = await freePorts(this.masters * 2 * 2);
    for (let i = 0; i < this.masters * 2; i++) {
      const port = ports[2 * i] as number;
      const busPort = ports[2 * i + 1] as number;
      const child = spawn(
        'redis-server',
        [
          '--port', String(port), '--cluster-port', String(busPort), '--bind', '127.0.0.1',
          '--cluster-enabled', 'yes', '--cluster-config-file', join(this.dir, `nodes-${port}.conf`),
          '--cluster-node-timeout', '1000', '--save', '', '--appendonly', 'no', '--dir', this.dir,
          // A replica syncs at once (Redis 7 waits 5 s for more replicas by default); until it has,
          // it refuses to take over its master's slots (its data counts as too old).
          '--repl-diskless-sync-delay', '0',
        ],
        { stdio: 'ignore' },
      );
      started.add(child);
      child.on('exit', () => started.delete(child));
      this.nodes.push({ port, busPort, process: child });
    }
    await waitUntil(async () => (await Promise.all(this.nodes.map((node) => askNode(node.port, (r) => r.ping()).catch(() => undefined)))).every((pong) => pong === 'PONG'), 15_000, 'every cluster node to answer PING');
    await run('redis-cli', ['--cluster', 'create', ...this.nodes.map((node) => `127.0.0.1:${node.port}`), '--cluster-replicas', '1', '--cluster-yes']);
    await this.waitUntilHealthy();
    return this;
  }

  /**
   * Waits until every live node says cluster_state:ok, the cluster has `masters` masters, and every
   * live replica is in sync with its master (a replica that never synced cannot take over).
   */
  async waitUntilHealthy(timeoutMs = 30_000): Promise<void> {
    await waitUntil(
      async () => {
        const live = this.nodes.filter((node) => node.process.exitCode === null && node.process.signalCode === null);
        const infos = await Promise.all(live.map((node) => askNode(node.port, (r) => r.cluster('INFO') as Promise<string>).catch(() => '')));
        if (!infos.every((info) => info.includes('cluster_state:ok'))) return false;
        const replication = await Promise.all(live.map((node) => askNode(node.port, (r) => r.info('replication')).catch(() => '')));
        if (!replication.every((info) => info.includes('role:master') || info.includes('master_link_status:up'))) return false;
        const masters = await this.masterPorts();
        return masters.length === this.masters;
      },
      timeoutMs,
      'the Redis Cluster to be healthy',
    );
  }

  /** The ports of the nodes that are masters now (and answer). */
  async masterPorts(): Promise<number[]> {
    const live = this.nodes.filter((node) => node.process.exitCode === null && node.process.signalCode === null);
    const roles = await Promise.all(
      live.map(async (node) => ({ port: node.port, role: await askNode(node.port, async (r) => ((await r.role()) as unknown[])[0] as string).catch(() => undefined) })),
    );
    return roles.filter((node) => node.role === 'master').map((node) => node.port);
  }

  /** The node serving a key's slot now. */
  async masterOf(key: string): Promise<number> {
    const seed = this.nodes.find((node) => node.process.exitCode === null && node.process.signalCode === null) as ClusterNode;
    const slot = (await askNode(seed.port, (r) => r.cluster('KEYSLOT', key))) as number;
    const ranges = (await askNode(seed.port, (r) => r.cluster('SLOTS'))) as unknown as Array<[number, number, [string, number]]>;
    const range = ranges.find(([from, to]) => slot >= from && slot <= to);
    if (!range) throw new Error(`no node serves slot ${slot}`);
    return range[2][1];
  }

  /** Kills one node by PID with the signal (SIGKILL: no goodbye to the cluster) and waits until it is gone. */
  async kill(port: number, signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    const node = this.nodes.find((candidate) => candidate.port === port);
    if (!node) throw new Error(`no node on port ${port}`);
    await killProcess(node.process, signal);
  }

  /** Kills every node by PID and removes the cluster's files. */
  async stop(): Promise<void> {
    await Promise.all(this.nodes.map((node) => killProcess(node.process, 'SIGKILL')));
    rmSync(this.dir, { recursive: true, force: true });
  }
}

async function killProcess(child: ChildProcess, signal: NodeJS.Signals): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null || !child.pid) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  process.kill(child.pid, signal);
  await exited;
}

/** Distinct free loopback ports (each bound and released, so none is handed out twice). */
async function freePorts(count: number): Promise<number[]> {
  const { createServer } = await import('node:net');
  const servers = await Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<import('node:net').Server>((resolve, reject) => {
          const server = createServer();
          server.once('error', reject);
          server.listen(0, '127.0.0.1', () => resolve(server));
        }),
    ),
  );
  const ports = servers.map((server) => (server.address() as import('node:net').AddressInfo).port);
  await Promise.all(servers.map((server) => new Promise<void>((resolve) => server.close(() => resolve()))));
  return ports;
}

function run(command: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    let output = '';
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`${command} ${args.join(' ')} exited ${code}: ${output.slice(-2_000)}`))));
  });
}

async function waitUntil(check: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check().catch(() => false)) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
}
