import { describe, expect, it } from '@jest/globals';
import { parseJobsAnnouncement } from '../src/queues/jobs-announcement.js';

describe('a jobs announcement (docs/adr/0015)', () => {
  it('names the queue prefix and the jobs, and nothing else is taken from it', () => {
    const payload = JSON.stringify({
      prefix: 'svc',
      fanout: [{ eventId: 'evt_1', extra: true }],
      deliveries: [{ deliveryId: 'dlv_1', subscriptionId: 'wh_1', attempt: 1, delay: 60_000 }],
    });

    expect(parseJobsAnnouncement(payload)).toEqual({
      prefix: 'svc',
      fanout: [{ eventId: 'evt_1' }],
      deliveries: [{ deliveryId: 'dlv_1', subscriptionId: 'wh_1', attempt: 1 }],
    });
  });

  it('may hold only deliveries, or only a fan-out job', () => {
    expect(parseJobsAnnouncement('{"prefix":"p","deliveries":[{"deliveryId":"d","subscriptionId":"s","attempt":1}]}')).toEqual({
      prefix: 'p',
      fanout: [],
      deliveries: [{ deliveryId: 'd', subscriptionId: 's', attempt: 1 }],
    });
    expect(parseJobsAnnouncement('{"prefix":"p","fanout":[{"eventId":"e"}]}')).toEqual({ prefix: 'p', fanout: [{ eventId: 'e' }], deliveries: [] });
  });

  it.each([
    ['not JSON', 'evt_1'],
    ['no prefix', '{"fanout":[{"eventId":"e"}]}'],
    ['an array', '[]'],
    ['a fan-out job without an event id', '{"prefix":"p","fanout":[{}]}'],
    ['deliveries that are not a list', '{"prefix":"p","deliveries":{"deliveryId":"d"}}'],
    ['an attempt number out of 1..7', '{"prefix":"p","deliveries":[{"deliveryId":"d","subscriptionId":"s","attempt":8}]}'],
    ['an attempt number that is not an integer', '{"prefix":"p","deliveries":[{"deliveryId":"d","subscriptionId":"s","attempt":"1"}]}'],
    ['an empty delivery id', '{"prefix":"p","deliveries":[{"deliveryId":"","subscriptionId":"s","attempt":1}]}'],
  ])('is refused when it is %s', (_what, payload) => {
    expect(parseJobsAnnouncement(payload)).toBeUndefined();
  });
});
