import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { generateApiKey } from '@svc/core';
import { seedAccount, seedSite } from '@svc/core/testing';
import { createTestApi, listen, type ListeningApi, type TestApi } from './support.js';

const FLOOD_REQUESTS = 3_000;
const FLOOD_CONCURRENCY = 40;
const NORMAL_REQUESTS = 150;
const NORMAL_CONCURRENCY = 3;

let api: TestApi;
let http: ListeningApi;

beforeAll(async () => {
  api = createTestApi({ RATE_LIMIT_PER_MINUTE: '100000' });
  http = await listen(api);
});
afterAll(async () => {
  await http.close();
  await api.close();
});

/** Half random well-formed keys (each a Postgres lookup, none repeated), half tokens that cannot be keys. */
function floodToken(i: number): string {
  if (i % 2 === 0) return generateApiKey();
  const junk = randomBytes(1 + (i % 60)).toString('base64');
  return i % 3 === 0 ? `svc_live_${junk}` : junk;
}

async function runWorkers(count: number, total: number, work: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: count }, async () => {
      while (next < total) await work(next++);
    }),
  );
}

describe('A flood of invalid keys beside normal traffic, on a real listening server', () => {
  it('refuses every invalid key with 401 and answers every normal request 200, with no 5xx anywhere', async () => {
    const accounts = await Promise.all([0, 1, 2].map(() => seedAccount(api.db, ['read:sites'])));
    for (const account of accounts) await seedSite(api.db, account.accountId);
    const floodStatuses: Record<number, number> = {};
    const normalStatuses: Record<number, number> = {};
    const count = (into: Record<number, number>, status: number) => (into[status] = (into[status] ?? 0) + 1);

    let floodDone = false;
    let answeredDuringFlood = 0;
    const flood = runWorkers(FLOOD_CONCURRENCY, FLOOD_REQUESTS, async (i) => {
      const res = await fetch(`${http.base}/api/v1/sites`, { headers: { authorization: `Bearer ${floodToken(i)}` } });
      await res.arrayBuffer();
      count(floodStatuses, res.status);
    }).finally(() => (floodDone = true));
    const normal = runWorkers(NORMAL_CONCURRENCY, NORMAL_REQUESTS, async (i) => {
      const res = await fetch(`${http.base}/api/v1/sites`, { headers: { authorization: `Bearer ${accounts[i % 3]!.key}` } });
      await res.arrayBuffer();
      count(normalStatuses, res.status);
      if (!floodDone) answeredDuringFlood += 1;
    });
    await Promise.all([flood, normal]);

    // The normal traffic really ran beside the flood, not after it.
    expect(answeredDuringFlood).toBeGreaterThan(NORMAL_REQUESTS / 2);
    expect(floodStatuses).toEqual({ 401: FLOOD_REQUESTS });
    expect(normalStatuses).toEqual({ 200: NORMAL_REQUESTS });
  }, 120_000);
});
