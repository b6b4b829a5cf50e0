import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { completeScan } from '@svc/core';
import { startScan } from '@svc/core/operator';
import { seedAccount, seedSite } from '@svc/core/testing';
import { startApi, type ListeningApi } from './support.js';

const run = promisify(execFile);
const SYNC = fileURLToPath(new URL('../../../../examples/nightly-sync/sync.mjs', import.meta.url));

let api: ListeningApi;
let dir: string;

beforeAll(async () => {
  api = await startApi({ RATE_LIMIT_PER_MINUTE: '100000' });
  dir = await mkdtemp(join(tmpdir(), 'nightly-sync-'));
});
afterAll(async () => {
  await api.close();
  await rm(dir, { recursive: true, force: true });
});

async function complete(siteId: string, score: number) {
  const scan = await startScan(api.db, siteId);
  return (await completeScan({ db: api.db, queues: api.queues }, { scanId: scan.id, score })).scan;
}

describe('examples/nightly-sync', () => {
  it('pulls every site’s history on its first night, only what is new on the next (an overlap refetched and dropped), and keeps a checkpoint', async () => {
    const { accountId, key } = await seedAccount(api.db, ['read:sites', 'read:scans']);
    const [a, b] = [await seedSite(api.db, accountId), await seedSite(api.db, accountId)];
    const first = [await complete(a.id, 10), await complete(a.id, 20), await complete(b.id, 30)];
    const env = { ...process.env, SVC_API_KEY: key, SVC_BASE_URL: api.baseUrl, CHECKPOINT_FILE: join(dir, 'checkpoint.json'), SCORES_FILE: join(dir, 'scores.jsonl') };

    const night1 = await run(process.execPath, [SYNC], { env });
    const second = await complete(b.id, 40);
    const night2 = await run(process.execPath, [SYNC], { env });

    expect(JSON.parse(night1.stdout)).toEqual({ sites: 2, newScans: 3 });
    expect(JSON.parse(night2.stdout)).toEqual({ sites: 2, newScans: 1 });
    const stored = (await readFile(env.SCORES_FILE, 'utf8')).trim().split('\n').map((line) => JSON.parse(line) as { scanId: string });
    expect(stored.map((s) => s.scanId).sort()).toEqual([...first, second].map((s) => s.id).sort());
    const checkpoint = JSON.parse(await readFile(env.CHECKPOINT_FILE, 'utf8')) as Record<string, { newest: string; recent: Record<string, string> }>;
    expect(checkpoint[a.id]!.newest).toBe(first[1]!.completedAt!.toISOString());
    expect(checkpoint[b.id]!.newest).toBe(second.completedAt!.toISOString());
    // Every scan of the last minute is remembered, so the overlap of the next run drops them.
    expect(Object.keys(checkpoint[b.id]!.recent).sort()).toEqual([first[2]!.id, second.id].sort());
  });
});
