import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { MAX_QUEUE_SHARDS } from '../src/config.js';
import { deliveryQueueName, FANOUT_QUEUE, hashSlot, shardOf } from '../src/queues/queues.js';
import { askNode, freePort, requireSystemCommand, waitFor } from '../src/testing/index.js';

const HASH_SLOTS = 16_384;

/**
 * The slots the service computes for itself (which shard a subscription's attempts go to, which
 * slot a shard's queue is in) against Redis's own CLUSTER KEYSLOT: one cluster-enabled
 * redis-server of this file (no slots assigned; KEYSLOT only needs cluster mode), killed by PID.
 */
let node: ChildProcess;
let port: number;
const dir = mkdtempSync(join(tmpdir(), 'svc-keyslot-'));

beforeAll(async () => {
  requireSystemCommand('redis-server', 'redis-server', 'CLUSTER KEYSLOT needs a redis-server in cluster mode');
  port = await freePort();
  node = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--cluster-enabled', 'yes', '--cluster-config-file', join(dir, 'nodes.conf'), '--save', '', '--appendonly', 'no', '--dir', dir],
    { stdio: 'ignore' },
  );
  await waitFor(() => askNode(port, (redis) => redis.ping()).catch(() => undefined), 10_000, 'the cluster-mode redis-server to answer');
});

afterAll(async () => {
  if (node && node.exitCode === null && node.signalCode === null) {
    const exited = new Promise((resolve) => node.once('exit', resolve));
    process.kill(node.pid!, 'SIGKILL');
    await exited;
  }
  rmSync(dir, { recursive: true, force: true });
});

/** Redis's own slot of each key, asked in one pipeline. */
async function keySlots(keys: readonly string[]): Promise<number[]> {
  return askNode(port, async (redis) => {
    const pipeline = redis.pipeline();
    for (const key of keys) pipeline.cluster('KEYSLOT', key);
    const results = (await pipeline.exec()) ?? [];
    return results.map(([error, slot]) => {
      if (error) throw error;
      return slot as number;
    });
  });
}

describe('hashSlot', () => {
  it('gives every key the slot Redis Cluster gives it: hash tags, empty and unclosed braces, multi-byte text, the service’s own keys', async () => {
    const random = Array.from({ length: 2_000 }, (_, i) => `${Math.random().toString(36).slice(2)}${i}`);
    const edges = [
      '', '{', '}', '{}', '{}x', 'x{}', '{}{a}', '{a}{b}', 'a{b}c', 'a{b', 'a}b{c}', '}{a}', '{{a}}', '{a', 'foo{}{bar}', 'foo{{bar}}zap', 'foo{bar}{zap}',
      '123456789', '{123456789}', 'ü', '{ü}', '日本語キー', 'a{日本}b', '😀', '{😀}x', 'key with spaces', '\u0000', 'a\u0000{b}',
    ];
    const service = [
      FANOUT_QUEUE, `svc:${FANOUT_QUEUE}:id`, 'svc:rl:{key_0123456789abcdef}', 'svc:revoked-key:{key_0123456789abcdef}', 'svc:queues',
      ...[1, 2, 3, 6, 16].flatMap((shards) => Array.from({ length: shards }, (_, shard) => deliveryQueueName(shard, shards))),
      ...Array.from({ length: 200 }, (_, i) => `wh_${(i * 7919).toString(16).padStart(32, '0')}`),
    ];
    const keys = [...random, ...edges, ...service];

    const theirs = await keySlots(keys);
    const ours = keys.map(hashSlot);

    expect(ours).toEqual(theirs);
    // The CRC16 (XMODEM) check value Redis's cluster specification gives.
    expect(hashSlot('123456789')).toBe(0x31c3);
  });
});

describe('delivery shards', () => {
  it.each([[1], [2], [3], [4], [6], [16], [MAX_QUEUE_SHARDS]])('names %p shards, each tagged in its own equal stretch of the slot range', (shards) => {
    const names = Array.from({ length: shards }, (_, shard) => deliveryQueueName(shard, shards));

    expect(new Set(names).size).toBe(shards);
    names.forEach((name, shard) => {
      expect(name).toMatch(new RegExp(`^\\{deliver-${shard}of${shards}-\\d+\\}$`));
      const slot = hashSlot(name);
      expect(slot).toBeGreaterThanOrEqual(Math.floor((shard * HASH_SLOTS) / shards));
      expect(slot).toBeLessThan(Math.floor(((shard + 1) * HASH_SLOTS) / shards));
    });
  });

  it('puts 3 shards on the 3 masters of a cluster split as redis-cli --cluster create splits it, and keeps their names from release to release', () => {
    const masterOfSlot = (slot: number) => (slot <= 5460 ? 'A' : slot <= 10922 ? 'B' : 'C');

    const names = [0, 1, 2].map((shard) => deliveryQueueName(shard, 3));

    expect(names.map((name) => masterOfSlot(hashSlot(name)))).toEqual(['A', 'B', 'C']);
    // Live queues are found by these names: a change would leave jobs on queues nobody works until the sweep moves them.
    expect(names).toEqual(['{deliver-0of3-2}', '{deliver-1of3-0}', '{deliver-2of3-1}']);
    expect(deliveryQueueName(0, 1)).toBe('{deliver-0of1-0}');
  });

  it('keeps a subscription on one shard (its slot modulo the shard count) and spreads subscriptions over every shard', () => {
    const ids = Array.from({ length: 3_000 }, (_, i) => `wh_${(i * 2654435761 % 2 ** 32).toString(16).padStart(8, '0')}${i}`);

    const first = ids.map((id) => shardOf(id, 3));
    const again = ids.map((id) => shardOf(id, 3));

    expect(again).toEqual(first);
    expect(first).toEqual(ids.map((id) => hashSlot(id) % 3));
    const perShard = [0, 1, 2].map((shard) => first.filter((s) => s === shard).length);
    for (const count of perShard) expect(count).toBeGreaterThan(800); // 1,000 each expected
    expect(shardOf(ids[0]!, 1)).toBe(0);
    // A fixed subscription's shard is the same in every release (else its attempts would change queues).
    expect([shardOf('123456789', 3), shardOf('123456789', 16)]).toEqual([0x31c3 % 3, 0x31c3 % 16]);
  });
});
