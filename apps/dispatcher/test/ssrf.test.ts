import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { completeScan } from '@svc/core';
import { createSubscription } from '@svc/core/operator';
import { uniqueTag } from '@svc/core/testing';
import { isPublicAddress } from '../src/http/ssrf-guard.js';
import { createHarness, seedTenant, type Harness } from './support/harness.js';
import {
  attemptsOf,
  producerOf,
  waitForDelivery,
} from './support/delivery-probe.js';

describe('isPublicAddress (the SSRF guard, operator contract §2)', () => {
  it.each([
    ['127.0.0.1', 'IPv4 loopback'],
    ['10.1.2.3', 'private 10/8'],
    ['172.16.0.1', 'private 172.16/12'],
    ['172.31.255.254', 'private 172.16/12, top end'],
    ['192.168.1.1', 'private 192.168/16'],
    ['169.254.169.254', 'link-local (cloud metadata)'],
    ['100.64.0.1', 'carrier-grade NAT'],
    ['0.0.0.0', 'unspecified'],
    ['255.255.255.255', 'broadcast'],
    ['224.0.0.1', 'multicast'],
    ['::1', 'IPv6 loopback'],
    ['::', 'IPv6 unspecified'],
    ['fe80::1', 'IPv6 link-local'],
    ['fc00::1', 'IPv6 unique-local'],
    ['ff02::1', 'IPv6 multicast'],
    ['::ffff:127.0.0.1', 'IPv4-mapped loopback'],
    ['::ffff:10.0.0.1', 'IPv4-mapped private'],
    ['64:ff9b::7f00:1', 'NAT64 of loopback'],
    ['not-an-address', 'not an IP at all'],
  ])('refuses %s (%s)', (address) => {
    expect(isPublicAddress(address)).toBe(false);
  });

  it.each([
    ['8.8.8.8', 'public IPv4'],
    ['172.32.0.1', 'just outside 172.16/12'],
    ['2606:4700:4700::1111', 'public IPv6'],
    ['::ffff:8.8.8.8', 'IPv4-mapped public'],
  ])('accepts %s (%s)', (address) => {
    expect(isPublicAddress(address)).toBe(true);
  });

  it('refuses IPv4-compatible IPv6 addresses embedding a loopback or private IPv4, in the form URL and DNS give them (::7f00:1 for [::127.0.0.1])', () => {
    expect(new URL('https://[::127.0.0.1]/').hostname).toBe('[::7f00:1]');
    expect(isPublicAddress('::127.0.0.1')).toBe(false);
    expect(isPublicAddress('::7f00:1')).toBe(false);
    expect(isPublicAddress('::a00:1')).toBe(false);
  });
});

describe('delivering to a private target', () => {
  let h: Harness;

  beforeAll(async () => {
    h = await createHarness({ WEBHOOK_RETRY_DELAYS_MS: Array(6).fill('600000').join(',') });
  });
  afterAll(async () => {
    await h.close();
  });

  /** One subscription per url in a fresh tenant, one event, and each delivery once attempt 1 is recorded. */
  async function attemptOnceEach(urls: string[]) {
    const tenant = await seedTenant(h);
    const subs = [];
    for (const url of urls) subs.push(await createSubscription(h.db, tenant.accountId, { url, events: ['*'] }));
    const { eventId } = await completeScan(producerOf(h), { scanId: (await tenant.newScan()).id, score: 5 });
    return Promise.all(
      subs.map(async (sub) => {
        const delivery = await waitForDelivery(h, eventId, sub.id, (row) => row.attempt_count >= 1 && row.locked_until === null, `attempt 1 to ${sub.url}`);
        return { url: sub.url, delivery, attempts: await attemptsOf(h, delivery.id) };
      }),
    );
  }

  it('with WEBHOOK_ALLOW_PRIVATE_TARGETS=false, blocks loopback targets by literal or by name before anything is sent', async () => {
    const dispatcher = h.startDispatcher({ WEBHOOK_ALLOW_PRIVATE_TARGETS: 'false' });
    try {
      const tag = uniqueTag();
      const port = h.receiver.port;
      const results = await attemptOnceEach([
        `https://127.0.0.1:${port}/ok/guarded-literal-${tag}`,
        `https://localhost:${port}/ok/guarded-name-${tag}`,
        `https://[::1]:${port}/ok/guarded-v6-${tag}`,
        `https://[::ffff:127.0.0.1]:${port}/ok/guarded-mapped-${tag}`,
      ]);

      for (const { url, delivery, attempts } of results) {
        expect({ url, status: delivery.status, attemptCount: delivery.attempt_count }).toEqual({ url, status: 'pending', attemptCount: 1 });
        expect(attempts).toHaveLength(1);
        expect(attempts[0]!.status_code).toBeNull();
        expect({ url, error: attempts[0]!.error }).toEqual({ url, error: expect.stringMatching(/^blocked/) });
      }
      expect(h.receiver.requests.filter((r) => r.path.includes(tag))).toEqual([]);
    } finally {
      await dispatcher.stop();
    }
  });

  it('with the guard off (as in tests), delivers the same loopback urls', async () => {
    const dispatcher = h.startDispatcher();
    try {
      const tag = uniqueTag();
      const port = h.receiver.port;
      const results = await attemptOnceEach([
        `https://127.0.0.1:${port}/ok/open-literal-${tag}`,
        `https://localhost:${port}/ok/open-name-${tag}`,
      ]);

      for (const { url, delivery, attempts } of results) {
        expect({ url, status: delivery.status }).toEqual({ url, status: 'delivered' });
        expect(attempts.map((a) => [a.status_code, a.error])).toEqual([[200, null]]);
        expect(h.receiver.to(new URL(url).pathname).map((r) => r.headers['x-service-delivery-id'])).toEqual([delivery.id]);
      }
    } finally {
      await dispatcher.stop();
    }
  });
});
