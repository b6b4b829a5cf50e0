import { expect } from '@jest/globals';
import { completeAiMonitorRun, shardOf, type Queues } from '@svc/core';
import type { Db } from '@svc/core';
import { uniqueTag } from '@svc/core/testing';
import { failuresBefore, type Arrivals, expectSigned } from './arrivals.js';
import { attemptsOf, type DeliveryRow } from './delivery-probe.js';
import { seedTenant, type Harness } from './harness.js';

export interface FleetSubscription {
  id: string;
  secret: string;
  path: string;
  /** Requests per delivery the receiver refuses (503) before it answers 200. */
  failures: number;
}

export interface FleetTenant {
  accountId: string;
  siteId: string;
  subscriptions: FleetSubscription[];
}

/**
 * Tenants, each with subscriptions at the recorder's paths; every `flakyEvery`th subscription is
 * flaky (its receiver refuses the first `flakyFailures` requests of each delivery). Subscriptions
 * are added until each shard of every count in `spread` holds at least `perShard` of them and a
 * flaky one, so a story never depends on where random ids happen to hash.
 */
export async function seedFleet(
  h: Harness,
  arrivals: Arrivals,
  options: { tenants: number; perTenant: number; flakyEvery: number; flakyFailures: number; spread: number[]; perShard: number },
): Promise<FleetTenant[]> {
  const tag = uniqueTag();
  const tenants = await Promise.all(Array.from({ length: options.tenants }, () => seedTenant(h)));
  const fleet: FleetTenant[] = tenants.map((tenant) => ({ accountId: tenant.accountId, siteId: tenant.site.id, subscriptions: [] }));
  let made = 0;
  const add = async (t: number, flaky: boolean) => {
    const i = made++;
    const failures = flaky ? options.flakyFailures : 0;
    const path = arrivals.path(failures > 0 ? `flaky${failures}` : 'ok', `${tag}-${t}-${i}`);
    const sub = await tenants[t]!.subscribe(path);
    fleet[t]!.subscriptions.push({ id: sub.id, secret: sub.secret, path, failures });
  };
  for (let t = 0; t < options.tenants; t++) for (let s = 0; s < options.perTenant; s++) await add(t, made % options.flakyEvery === options.flakyEvery - 1);
  const all = () => fleet.flatMap((tenant) => tenant.subscriptions);
  const missing = (pick: (sub: FleetSubscription) => boolean, least: number) =>
    options.spread.some((shards) => Array.from({ length: shards }, (_, k) => all().filter((sub) => pick(sub) && shardOf(sub.id, shards) === k).length).some((n) => n < least));
  // Bounded: were shardOf to send every id to one shard, the story's own checks say so.
  for (let t = 0, extra = 0; extra < 8 * options.tenants * options.perTenant; t = (t + 1) % options.tenants, extra++) {
    if (options.flakyFailures > 0 && missing((sub) => sub.failures > 0, 1)) await add(t, true);
    else if (missing(() => true, options.perShard)) await add(t, false);
    else break;
  }
  return fleet;
}

/** Publishes `perTenant` events for every tenant through the given queues (a producer at their shard count); returns the event ids. */
export async function publishTo(db: Db, queues: Queues, fleet: FleetTenant[], perTenant: number): Promise<string[]> {
  const ids = await Promise.all(
    fleet.flatMap((tenant) =>
      Array.from({ length: perTenant }, async (_, i) => (await completeAiMonitorRun({ db, queues }, { siteId: tenant.siteId, compositeScore: i % 100 })).eventId),
    ),
  );
  return ids;
}

/** The deliveries of the events, each with its subscription. */
export async function deliveriesOf(h: Harness, fleet: FleetTenant[], eventIds: string[]): Promise<Array<DeliveryRow & { subscription: FleetSubscription }>> {
  const subscriptions = new Map(fleet.flatMap((tenant) => tenant.subscriptions).map((sub) => [sub.id, sub]));
  const rows = (await h.db('deliveries').whereIn('event_id', eventIds).select('*')) as DeliveryRow[];
  return rows.map((row) => ({ ...row, subscription: subscriptions.get(row.subscription_id)! }));
}

/** How many deliveries the events make: one per subscription of the event's tenant. */
export async function expectedDeliveries(h: Harness, fleet: FleetTenant[], eventIds: string[]): Promise<number> {
  const byAccount = new Map(fleet.map((tenant) => [tenant.accountId, tenant.subscriptions.length]));
  const events = (await h.db('events').whereIn('id', eventIds).select('id', 'account_id')) as Array<{ id: string; account_id: string }>;
  expect(events).toHaveLength(eventIds.length);
  return events.reduce((sum, event) => sum + (byAccount.get(event.account_id) ?? 0), 0);
}

export async function countDelivered(h: Harness, eventIds: string[]): Promise<number> {
  const [row] = await h.db('deliveries').whereIn('event_id', eventIds).where({ status: 'delivered' }).count<{ n: string }[]>({ n: '*' });
  return Number(row?.n ?? 0);
}

/**
 * Every delivery of the events was sent exactly once per attempt: its receiver saw as many
 * requests as it has recorded attempts (none sent twice), the refusals its mode makes and then one
 * 200, the attempts numbered 1..n in time order, and the 200 carries the event's bytes signed with
 * the subscription's secret (v1 and Standard Webhooks).
 */
export async function expectEachDeliveredOnce(h: Harness, arrivals: Arrivals, fleet: FleetTenant[], eventIds: string[]): Promise<number> {
  const deliveries = await deliveriesOf(h, fleet, eventIds);
  expect(deliveries).toHaveLength(await expectedDeliveries(h, fleet, eventIds));
  const bodies = new Map(((await h.db('events').whereIn('id', eventIds).select('id', 'body')) as Array<{ id: string; body: string }>).map((event) => [event.id, event.body]));
  const byDelivery = arrivals.byDelivery();
  for (const delivery of deliveries) {
    const got = byDelivery.get(delivery.id) ?? [];
    const failures = failuresBefore(delivery.subscription.path.slice(arrivals.prefix.length));
    const attempts = await attemptsOf(h, delivery.id);
    expect({ delivery: delivery.id, status: delivery.status, answered: got.map((arrival) => arrival.status), attempts: attempts.map((attempt) => `${attempt.n}: ${attempt.status_code ?? attempt.error}`) }).toEqual({
      delivery: delivery.id,
      status: 'delivered',
      answered: [...Array(failures).fill(503), 200],
      attempts: Array.from({ length: failures + 1 }, (_, i) => `${i + 1}: ${i < failures ? 503 : 200}`),
    });
    for (let i = 1; i < attempts.length; i++) expect(attempts[i]!.at.getTime()).toBeGreaterThan(attempts[i - 1]!.at.getTime());
    for (const arrival of got) expect(arrival.path).toBe(delivery.subscription.path);
    expectSigned(got.at(-1)!, delivery.subscription.secret, bodies.get(delivery.event_id)!);
  }
  return deliveries.length;
}
