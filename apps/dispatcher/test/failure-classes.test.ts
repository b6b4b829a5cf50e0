import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { completeScan, createLogger, startMetricsServer, type MetricsServer } from '@svc/core';
import { createSubscription } from '@svc/core/operator';
import { freePort, httpGet, scrapeSample, uniqueTag, waitFor } from '@svc/core/testing';
import { errorFailure, FAILURE_CLASSES, statusFailure } from '../src/http/attempt-failure.js';
import { BlockedTargetError } from '../src/http/ssrf-guard.js';
import { attemptsOf, producerOf, waitForDelivery } from './support/delivery-probe.js';
import { TestDnsServer } from './support/dns-server.js';
import { createHarness, seedTenant, type Harness } from './support/harness.js';

/** Long enough that only attempt 1 happens during a test. */
const LONG_DELAYS = Array(6).fill('600000').join(',');
/**
 * Long enough that the in-process receiver's 503 always comes first on a loaded machine (at 1 s an
 * attempt could time out before it answered); the hanging receiver costs this file that long.
 */
const TIMEOUT_MS = 5_000;

const coded = (code: string, message = code) => Object.assign(new Error(message), { code });

describe('the class an attempt failure is counted under', () => {
  it('folds every status into a class, keeping the delivery log’s words', () => {
    expect(statusFailure(200)).toBeNull();
    expect(statusFailure(204)).toBeNull();
    expect(statusFailure(302)).toEqual({ error: 'redirect 302 not followed', failure: 'redirect' });
    expect(statusFailure(404)).toEqual({ error: 'HTTP 404', failure: '4xx' });
    expect(statusFailure(413)).toEqual({ error: 'HTTP 413', failure: 'too_large' });
    expect(statusFailure(429)).toEqual({ error: 'HTTP 429', failure: '4xx' });
    expect(statusFailure(503)).toEqual({ error: 'HTTP 503', failure: '5xx' });
    expect(statusFailure(101)).toEqual({ error: 'HTTP 101', failure: 'other' });
    expect(statusFailure(999)).toEqual({ error: 'HTTP 999', failure: 'other' });
  });

  it('classes an error by its code, never by its message', () => {
    expect(errorFailure(coded('ENOTFOUND'))).toEqual({ error: 'host not found', failure: 'dns' });
    expect(errorFailure(coded('ETIMEOUT'))).toEqual({ error: 'dns timeout', failure: 'dns' });
    expect(errorFailure(coded('ECONNREFUSED'))).toEqual({ error: 'connection refused', failure: 'connect' });
    expect(errorFailure(coded('EHOSTUNREACH', 'no route'))).toEqual({ error: 'EHOSTUNREACH: no route', failure: 'connect' });
    expect(errorFailure(coded('ECONNRESET'))).toEqual({ error: 'connection reset', failure: 'reset' });
    expect(errorFailure(coded('EPIPE'))).toEqual({ error: 'connection reset', failure: 'reset' });
    expect(errorFailure(coded('ERR_TLS_CERT_ALTNAME_INVALID'))).toEqual({ error: 'tls error: ERR_TLS_CERT_ALTNAME_INVALID', failure: 'tls' });
    expect(errorFailure(coded('ETIMEDOUT'))).toEqual({ error: 'timeout', failure: 'timeout' });
    expect(errorFailure(new BlockedTargetError('10.0.0.1'))).toEqual({ error: 'blocked: target 10.0.0.1 is not a public address', failure: 'blocked' });
    // got wraps the socket's error: the cause's code decides.
    expect(errorFailure(Object.assign(new Error('wrapped'), { cause: coded('ENOTFOUND') }))).toEqual({ error: 'host not found', failure: 'dns' });
    expect(errorFailure(coded('EWHATEVER', 'host not found'))).toEqual({ error: 'EWHATEVER: host not found', failure: 'other' });
    for (const { failure } of [statusFailure(500)!, errorFailure(new Error('no code'))]) expect(FAILURE_CLASSES).toContain(failure);
  });
});

describe('receivers that answer 503, whose name does not resolve, and that never answer', () => {
  let h: Harness;
  let dns: TestDnsServer;
  let server: MetricsServer;

  beforeAll(async () => {
    // Answers no name at all: every lookup through it times out, as a tenant's dead name server.
    dns = await new TestDnsServer({}).start();
    h = await createHarness({
      WEBHOOK_RETRY_DELAYS_MS: LONG_DELAYS,
      WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS),
      WEBHOOK_DNS_SERVERS: dns.server,
      WEBHOOK_DNS_TIMEOUT_MS: '200',
      WEBHOOK_DNS_TRIES: '1',
    });
    const dispatcher = h.startDispatcher();
    server = await startMetricsServer({ port: await freePort(), host: '127.0.0.1', registry: dispatcher.metrics.registry, logger: createLogger('error', { silent: true }) });
  });
  afterAll(async () => {
    await server.close();
    await h.close();
    await dns.close();
  });

  async function scrape(): Promise<string> {
    const res = await httpGet(`http://127.0.0.1:${server.port}/metrics`);
    expect(res.status).toBe(200);
    return res.text;
  }
  const failures = (text: string, failure: string) => scrapeSample(text, 'svc_dispatcher_attempt_failures_total', { class: failure });

  it('count each failed attempt under its class: 5xx, dns, timeout, and no other', async () => {
    const before = await scrape();
    for (const failure of FAILURE_CLASSES) expect(failures(before, failure)).toBe(0);

    const tenant = await seedTenant(h);
    const tag = uniqueTag();
    const unavailable = `/ok/unavailable-${tag}`;
    h.receiver.answerWith(unavailable, 503);
    const answers503 = await tenant.subscribe(unavailable, ['scan.completed']);
    const unresolvable = await createSubscription(h.db, tenant.accountId, {
      url: `https://nowhere-${tag}.dns.test:${h.receiver.port}/ok/nowhere-${tag}`,
      events: ['scan.completed'],
    });
    const hangs = await tenant.subscribe(`/hang/classes-${tag}`, ['scan.completed']);
    const { eventId } = await completeScan(producerOf(h), { scanId: (await tenant.newScan()).id, score: 40 });

    const attempt1 = async (subscriptionId: string) => {
      const delivery = await waitForDelivery(h, eventId, subscriptionId, (row) => row.attempt_count >= 1 && row.locked_until === null, 'attempt 1 to be recorded', TIMEOUT_MS + 15_000);
      return (await attemptsOf(h, delivery.id))[0]!;
    };
    expect(await attempt1(answers503.id)).toMatchObject({ status_code: 503, error: 'HTTP 503' });
    expect(await attempt1(unresolvable.id)).toMatchObject({ status_code: null, error: 'dns timeout' });
    expect(await attempt1(hangs.id)).toMatchObject({ status_code: null, error: 'timeout' });

    // The counters move just after each outcome is recorded: poll until the three are counted, then compare.
    let text = '';
    await waitFor(async () => {
      text = await scrape();
      return ['5xx', 'dns', 'timeout'].every((failure) => (failures(text, failure) ?? 0) >= 1) && (scrapeSample(text, 'svc_dispatcher_attempts_total', { outcome: 'retry' }) ?? 0) >= 3;
    }, 10_000).catch(() => undefined);
    expect(failures(text, '5xx')).toBe(1);
    expect(failures(text, 'dns')).toBe(1);
    expect(failures(text, 'timeout')).toBe(1);
    for (const failure of FAILURE_CLASSES.filter((f) => !['5xx', 'dns', 'timeout'].includes(f))) expect(failures(text, failure)).toBe(0);
    expect(scrapeSample(text, 'svc_dispatcher_attempts_total', { outcome: 'retry' })).toBe(3);
    expect(text).not.toContain(tag);
  });
});
