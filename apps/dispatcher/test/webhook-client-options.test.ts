import { Agent as HttpAgent } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import { describe, expect, it } from '@jest/globals';
import got, { Options } from 'got';
import { leanNativeRequestOptions, useLeanNativeRequestOptions } from '../src/http/webhook-client.js';

const httpsAgent = new HttpsAgent({ keepAlive: true });
const httpAgent = new HttpAgent({ keepAlive: true });
const lookup = () => undefined;
const lean = got.extend({
  headers: { 'content-type': 'application/json', 'user-agent': 'Service-Webhooks/1.0' },
  agent: { https: httpsAgent, http: httpAgent },
  http2: false,
  dnsLookup: lookup as never,
  hooks: { init: [useLeanNativeRequestOptions] },
});

/** An attempt's Options as got builds them for `got.stream.post(url, { body, headers })`. */
function attemptOptions(url: string): Options {
  return new Options(url, { method: 'POST', body: Buffer.from('{"a":1}'), headers: { 'x-service-event': 'scan.completed' } }, lean.defaults.options);
}

describe('an attempt\'s native request options (got\'s init hook)', () => {
  it.each([
    ['https', 'https://receiver.example/hook', httpsAgent],
    ['http', 'http://receiver.example/hook', httpAgent],
  ])('are the %s method, headers, agent and lookup got itself would give Node', (_label, url, agent) => {
    const options = attemptOptions(url);
    const gots = Options.prototype.createNativeRequestOptions.call(options) as unknown as Record<string, unknown>;

    expect(options.createNativeRequestOptions).toBe(leanNativeRequestOptions);
    const ours = options.createNativeRequestOptions() as unknown as Record<string, unknown>;
    expect(Object.keys(ours).sort()).toEqual(['agent', 'headers', 'lookup', 'method']);
    for (const key of Object.keys(ours)) expect(ours[key]).toBe(gots[key]);
    expect(ours).toMatchObject({ method: 'POST', agent, lookup });
    expect(ours.headers).toMatchObject({ 'content-type': 'application/json', 'x-service-event': 'scan.completed' });
  });

  it('falls back to got\'s own options when HTTP/2 or a cache would read more of them', () => {
    const options = new Options('https://receiver.example/hook', { method: 'POST', http2: true }, lean.defaults.options);

    expect(Object.keys(options.createNativeRequestOptions()).length).toBeGreaterThan(20);
  });
});
