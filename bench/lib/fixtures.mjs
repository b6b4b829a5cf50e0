// The benchmark's own database (never the dev `svc` nor the test `svc_test`) and its data:
// small things through the @svc/core functions an operator's `svc` command uses, bulk things
// (10,000 sites, thousands of keys, 1,000 subscriptions) through plain SQL inserts.
import { generateApiKey, hashApiKey, KEY_DISPLAY_LENGTH, dropDatabase, migrateToLatest, newId, randomHex } from '@svc/core';
import { createAccount, createApiKey, createSite, createSubscription, markScanCompleted, startScan } from '@svc/core/operator';

/** Drops and re-creates the bench database, then applies every migration. */
export async function resetDatabase(databaseUrl) {
  const url = new URL(databaseUrl);
  const name = decodeURIComponent(url.pathname.slice(1));
  if (!/bench/.test(name)) throw new Error(`refusing to reset database "${name}": its name must contain "bench"`);
  await dropDatabase(databaseUrl);
  return migrateToLatest(databaseUrl);
}

async function insertChunked(db, table, rows, chunk = 1_000) {
  for (let i = 0; i < rows.length; i += chunk) await db(table).insert(rows.slice(i, i + chunk));
}

/** `count` keys of the account, inserted in bulk exactly as createApiKey stores them. */
export async function bulkKeys(db, accountId, count, scopes = 'read:sites,read:webhooks') {
  const keys = [];
  const rows = [];
  for (let i = 0; i < count; i++) {
    const key = generateApiKey();
    keys.push(key);
    rows.push({ id: newId('key'), account_id: accountId, name: `bench ${i}`, key_hash: hashApiKey(key), prefix: key.slice(0, KEY_DISPLAY_LENGTH), scopes });
  }
  await insertChunked(db, 'api_keys', rows);
  return keys;
}

/** `count` sites, newest last, each with one completed scan. */
export async function bulkSites(db, accountId, count) {
  const { rows } = await db.raw(
    `INSERT INTO sites (id, account_id, domain, name, status, created_at)
     SELECT 'site_' || replace(gen_random_uuid()::text, '-', ''), ?, 'site-' || g || '.example.com', 'Site ' || g,
            (ARRAY['active', 'inactive', 'prospect'])[1 + g % 3], now() - make_interval(secs => ? - g)
       FROM generate_series(1, ?) g
     RETURNING id`,
    [accountId, count, count],
  );
  await db.raw(
    `INSERT INTO scans (id, site_id, status, score, started_at, completed_at)
     SELECT 'scan_' || replace(gen_random_uuid()::text, '-', ''), s.id, 'completed', round((random() * 100)::numeric, 1),
            now() - interval '2 hours', now() - interval '1 hour'
       FROM sites s WHERE s.account_id = ?`,
    [accountId],
  );
  return rows.map((row) => row.id);
}

/** A site of the account with `count` completed scans, one a minute, inserted in one statement. */
export async function bulkHistorySite(db, accountId, label, count) {
  const site = await createSite(db, accountId, { domain: `history-${label}.example.com` });
  await db.raw(
    `INSERT INTO scans (id, site_id, status, score, trigger, started_at, completed_at)
     SELECT 'scan_' || replace(gen_random_uuid()::text, '-', ''), ?, 'completed', round((random() * 100)::numeric, 1),
            (ARRAY['scheduled', 'manual'])[1 + g % 2], now() - make_interval(mins => g + 1), now() - make_interval(mins => g)
       FROM generate_series(1, ?) g`,
    [site.id, count],
  );
  return site.id;
}

/**
 * Where pages of 100 start, spread over a site's whole history: the first page (no cursor) and
 * the positions after every `step`-th scan, as (completedAt, id) in the history's order.
 */
export async function historyPositions(db, siteId, pages) {
  const { rows } = await db.raw(
    `SELECT completed_at, id FROM (
       SELECT completed_at, id, row_number() OVER (ORDER BY completed_at DESC, id DESC) AS n
         FROM scans WHERE site_id = ? AND status = 'completed') t
      WHERE n % 100 = 0 ORDER BY n`,
    [siteId],
  );
  // Leave out the last page boundary when it is the history's end (it would start an empty page).
  const usable = rows.slice(0, Math.max(0, rows.length - 1));
  const step = Math.max(1, Math.floor(usable.length / pages));
  return usable.filter((_, i) => i % step === 0).map((row) => ({ completedAt: row.completed_at, id: row.id }));
}

/** `count` subscriptions of the account to `url`, as createSubscription stores them. */
export async function bulkSubscriptions(db, accountId, url, count, events = ['*']) {
  const rows = Array.from({ length: count }, () => ({ id: newId('wh'), account_id: accountId, url, events, secret: randomHex(32) }));
  await insertChunked(db, 'webhook_subscriptions', rows, 500);
  return rows.map((row) => row.id);
}

/**
 * Everything the cases read or publish to. `receiverUrl` is the receiver's https base.
 * P holds the sizes (key counts, fan-out width, ...).
 */
export async function seed(db, receiverUrl, P) {
  // API, small account: 10 sites, each with a running and two completed scans, 10 subscriptions.
  const small = await createAccount(db, { name: 'bench api: 10 sites' });
  const smallSites = [];
  for (let i = 0; i < 10; i++) {
    const site = await createSite(db, small.id, { domain: `https://www.small-${i}.example.com/`, name: i % 4 ? `Small ${i}` : null });
    for (let s = 0; s < 2; s++) await markScanCompleted(db, (await startScan(db, site.id)).id, 50 + i + s);
    await startScan(db, site.id);
    smallSites.push(site.id);
  }
  for (let i = 0; i < 10; i++) await createSubscription(db, small.id, { url: `${receiverUrl}/ok?sub=${i}`, events: ['scan.completed', 'power_up.deployed'] });
  // One key the normal way, the rest in bulk.
  const smallKeys = [(await createApiKey(db, small.id, { name: 'bench', scopes: ['read:sites', 'read:webhooks'] })).key];
  smallKeys.push(...(await bulkKeys(db, small.id, P.keysSmall - 1)));

  // API, 100 and 10,000 sites (growth).
  const hundred = await createAccount(db, { name: 'bench api: 100 sites' });
  const hundredSites = await bulkSites(db, hundred.id, 100);
  const hundredKeys = await bulkKeys(db, hundred.id, P.keysHundred);
  const large = await createAccount(db, { name: 'bench api: 10,000 sites' });
  const largeSites = await bulkSites(db, large.id, P.largeSites);
  const largeKeys = await bulkKeys(db, large.id, P.keysLarge);

  // API, the score history: pages of 100 from sites with 100, 10,000 and 100,000 completed scans.
  const history = await createAccount(db, { name: 'bench api: score history' });
  const historySites = {
    s100: await bulkHistorySite(db, history.id, '100', 100),
    s10k: await bulkHistorySite(db, history.id, '10k', 10_000),
    s100k: await bulkHistorySite(db, history.id, '100k', 100_000),
  };
  const historyKeys = await bulkKeys(db, history.id, P.keysHistory, 'read:scans');

  // Dispatcher: throughput/latency accounts (one site, one subscription each) and the fan-out
  // account (its subscriptions also carry the retry and memory cases' deliveries).
  const tp = [];
  for (let i = 0; i < P.tpAccounts; i++) {
    const account = await createAccount(db, { name: `bench throughput ${i}` });
    const site = await createSite(db, account.id, { domain: `tp-${i}.example.com` });
    const sub = await createSubscription(db, account.id, { url: `${receiverUrl}/ok`, events: ['*'] });
    tp.push({ accountId: account.id, siteId: site.id, subscriptionId: sub.id, secret: sub.secret });
  }
  // Scale-out (case 2b), dispatcher-bound: the same shape, but the receiver answers late.
  const tpSlow = [];
  for (let i = 0; i < P.tpAccounts; i++) {
    const account = await createAccount(db, { name: `bench scale-out ${i}` });
    const site = await createSite(db, account.id, { domain: `so-${i}.example.com` });
    const sub = await createSubscription(db, account.id, { url: `${receiverUrl}/slow/${P.scaleoutDelayMs}`, events: ['*'] });
    tpSlow.push({ accountId: account.id, siteId: site.id, subscriptionId: sub.id, secret: sub.secret });
  }
  const fanAccount = await createAccount(db, { name: 'bench fan-out' });
  const fanSite = await createSite(db, fanAccount.id, { domain: 'fan.example.com' });
  const fanSubs = await bulkSubscriptions(db, fanAccount.id, `${receiverUrl}/ok`, P.fanoutSubs);

  // Fan-out, reported at a larger width (issue 13): one event to this account's subscriptions.
  const wideAccount = await createAccount(db, { name: 'bench fan-out, wide' });
  const wideSite = await createSite(db, wideAccount.id, { domain: 'fan-wide.example.com' });
  const wideSubs = await bulkSubscriptions(db, wideAccount.id, `${receiverUrl}/ok`, P.fanoutWideSubs);

  await db.raw('VACUUM ANALYZE scans');
  await db.raw('ANALYZE');
  const historyPages = {
    s10k: await historyPositions(db, historySites.s10k, 50),
    s100k: await historyPositions(db, historySites.s100k, 50),
  };
  return {
    history: { accountId: history.id, sites: historySites, keys: historyKeys, pages: historyPages },
    small: { accountId: small.id, sites: smallSites, keys: smallKeys },
    hundred: { accountId: hundred.id, sites: hundredSites, keys: hundredKeys },
    large: { accountId: large.id, sites: largeSites, keys: largeKeys },
    tp,
    tpSlow,
    fan: { accountId: fanAccount.id, siteId: fanSite.id, subscriptions: fanSubs },
    wide: { accountId: wideAccount.id, siteId: wideSite.id, subscriptions: wideSubs },
  };
}

/**
 * Hands out API keys so that no key ever exceeds the 60/min limit: each key serves `uses`
 * requests in a row, and a key is not handed out again until `coolMs` after its last use.
 * If every key is still warm the least recently used one is reused and counted as `hot`.
 */
export class KeyPool {
  constructor(keys, { uses = 55, coolMs = 61_000 } = {}) {
    this.keys = keys;
    this.uses = uses;
    this.coolMs = coolMs;
    this.lastUsed = new Float64Array(keys.length).fill(-Infinity);
    this.index = 0;
    this.used = 0;
    this.hot = 0;
    this.issued = 0;
  }
  next() {
    const now = Date.now();
    if (this.used >= this.uses) {
      this.index = (this.index + 1) % this.keys.length;
      this.used = 0;
      if (now - this.lastUsed[this.index] < this.coolMs) this.hot++;
    }
    this.used++;
    this.issued++;
    this.lastUsed[this.index] = now;
    return this.keys[this.index];
  }
}

/**
 * What autovacuum does to the tables the delivery path writes, done at once: dead row versions
 * made reusable and statistics brought up to date (which also makes every session plan its
 * prepared statements again). For a Postgres that runs without autovacuum (`autovacuum = off`,
 * as on some shared machines); a customer's Postgres runs it on its own.
 */
export async function vacuumAsAutovacuumWould(db) {
  await db.raw('VACUUM (ANALYZE) events, deliveries, delivery_attempts, webhook_subscriptions, scans, ai_monitor_runs, power_up_deployments');
}
