import type { IncomingHttpHeaders } from 'node:http';
import { expect } from '@jest/globals';
import { Webhook } from 'standardwebhooks';
import { verifySignature } from '@svc/core';
import type { Receiver } from './receiver.js';

/** One request the receiver answered, with the status it answered. */
export interface Arrival {
  path: string;
  deliveryId: string;
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
  receivedAt: number;
}

/**
 * Answers and records every request under `prefix` (the receiver's own log does not keep the
 * status it answered): `<prefix>/ok/…` → 200; `<prefix>/flaky<n>/…` → 503 for the first n
 * requests of each delivery id, then 200. Anything under the prefix that counts a 2xx arrival
 * reads it here.
 */
export class Arrivals {
  readonly all: Arrival[] = [];
  private readonly seen = new Map<string, number>();

  constructor(
    receiver: Receiver,
    readonly prefix: string,
  ) {
    receiver.handle(prefix, (req, res, body) => {
      const path = req.url ?? '/';
      const deliveryId = String(req.headers['x-service-delivery-id'] ?? '');
      const seen = (this.seen.get(deliveryId) ?? 0) + 1;
      this.seen.set(deliveryId, seen);
      const status = seen <= failuresBefore(path.slice(prefix.length)) ? 503 : 200;
      this.all.push({ path, deliveryId, status, headers: req.headers, body, receivedAt: Date.now() });
      res.writeHead(status, { 'content-type': 'text/plain' }).end(status === 200 ? 'ok' : 'not yet');
    });
  }

  /** A path of this recorder: `ok` or `flaky<n>`, then a name. */
  path(mode: 'ok' | `flaky${number}`, name: string): string {
    return `${this.prefix}/${mode}/${name}`;
  }

  of(deliveryId: string): Arrival[] {
    return this.all.filter((arrival) => arrival.deliveryId === deliveryId);
  }

  /** Arrivals per delivery id, in arrival order. */
  byDelivery(): Map<string, Arrival[]> {
    const by = new Map<string, Arrival[]>();
    for (const arrival of this.all) {
      const list = by.get(arrival.deliveryId);
      if (list) list.push(arrival);
      else by.set(arrival.deliveryId, [arrival]);
    }
    return by;
  }
}

/** How many requests per delivery id the mode of a path refuses first. */
export function failuresBefore(rest: string): number {
  const flaky = /^\/flaky(\d+)\//.exec(rest);
  return flaky ? Number(flaky[1]) : 0;
}

/** How a receiver configures a Standard Webhooks library with the secret the create call returned. */
export const standardSecret = (secret: string) => `whsec_${Buffer.from(secret, 'utf8').toString('base64')}`;

/** The arrival carries the event's bytes, signed with the subscription's secret both ways (X-Service-Signature v1 and Standard Webhooks). */
export function expectSigned(arrival: Arrival, secret: string, eventBody: string): void {
  expect(arrival.body.equals(Buffer.from(eventBody, 'utf8'))).toBe(true);
  expect(verifySignature(arrival.body, arrival.headers['x-service-signature'] as string, secret)).toBe(true);
  expect(new Webhook(standardSecret(secret)).verify(arrival.body, arrival.headers as Record<string, string>)).toEqual(JSON.parse(eventBody));
  expect(arrival.headers['webhook-id']).toBe(arrival.deliveryId);
}
