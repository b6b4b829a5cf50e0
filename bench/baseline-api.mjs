// The API baseline: a minimal Express 5 app doing what any such endpoint must at least do —
// one Redis EVALSHA (the same sliding-window script as the service's limiter, keyed by the
// presented bearer token) and one prepared Postgres primary-key read of a sites row — then
// answering JSON of the same size as the service's response for that endpoint. For the score
// history: one EVALSHA and one indexed range read of 100 scans rows of the site, as JSON of the
// same size as the service's page.
//
// env: PORT, DATABASE_URL, REDIS_URL, BASE_KEY_PREFIX, BASE_SITE_ID, BASE_SIZES (JSON
// {detail, list, webhooks, history} in bytes), DB_POOL_MAX.
import express from 'express';
import { Redis } from 'ioredis';
import pg from 'pg';

const SLIDING_WINDOW_SCRIPT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local count = redis.call('ZCARD', KEYS[1])
local allowed = 0
if count < limit then
  redis.call('ZADD', KEYS[1], now, now .. ':' .. ARGV[3])
  count = count + 1
  allowed = 1
end
redis.call('PEXPIRE', KEYS[1], window)
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local reset = now + window
if oldest[2] then reset = tonumber(oldest[2]) + window end
return {allowed, count, reset}
`;

const sizes = JSON.parse(process.env.BASE_SIZES ?? '{}');
const prefix = process.env.BASE_KEY_PREFIX ?? 'bench-base';
const fixedSiteId = process.env.BASE_SITE_ID;

const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: 0 });
redis.defineCommand('slidingWindow', { numberOfKeys: 1, lua: SLIDING_WINDOW_SCRIPT }); // EVALSHA, EVAL on NOSCRIPT
const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: Number(process.env.DB_POOL_MAX ?? 20) });

let sequence = 0;
const member = Math.random().toString(36).slice(2, 10);

async function limitAndRead(req, siteId) {
  const auth = req.get('authorization') ?? '';
  const token = auth.slice(7);
  const [allowed] = await redis.slidingWindow(`${prefix}:rl:${token}`, 1_000_000, 60_000, `${member}${(sequence++).toString(36)}`);
  const { rows } = await pool.query({
    name: 'site_by_id',
    text: 'SELECT id, domain, name, status, created_at FROM sites WHERE id = $1',
    values: [siteId],
  });
  return { allowed: allowed === 1, row: rows[0] };
}

/** JSON of exactly `size` bytes (ASCII) built from the row, padded with a filler field. */
function sized(res, wrapperKey, row, size) {
  const json = JSON.stringify({
    data: {
      [wrapperKey]: row && {
        id: row.id,
        domain: row.domain,
        name: row.name,
        status: row.status,
        createdAt: row.created_at.toISOString(),
      },
    },
  });
  const missing = (size ?? 0) - json.length - 10; // ,"pad":"" is 10 bytes
  const body = missing >= 0 ? `${json.slice(0, -1)},"pad":"${'x'.repeat(missing)}"}` : json;
  res.type('json').send(body);
}

/** The site's latest 100 completed scans: a range read of the history index, as the service's first page. */
async function limitAndReadHistory(req, siteId) {
  const token = (req.get('authorization') ?? '').slice(7);
  await redis.slidingWindow(`${prefix}:rl:${token}`, 1_000_000, 60_000, `${member}${(sequence++).toString(36)}`);
  const { rows } = await pool.query({
    name: 'history_page',
    // Times formatted by Postgres, as the service does: the baseline takes the same shortcut.
    text: `SELECT id, score, trigger,
                  to_char(started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS started_at,
                  to_char(completed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS completed_at
             FROM scans c WHERE c.site_id = $1 AND c.status = 'completed' ORDER BY c.completed_at DESC, c.id DESC LIMIT 100`,
    values: [siteId],
  });
  return rows;
}

function sizedHistory(res, rows, size) {
  const scans = rows.map((row) => ({
    id: row.id,
    score: row.score,
    status: 'completed',
    trigger: row.trigger,
    startedAt: row.started_at,
    completedAt: row.completed_at,
  }));
  const json = JSON.stringify({ data: { scans, nextCursor: null } });
  const missing = (size ?? 0) - json.length - 10;
  res.type('json').send(missing >= 0 ? `${json.slice(0, -1)},"pad":"${'x'.repeat(missing)}"}` : json);
}

const app = express();
app.disable('x-powered-by');
app.set('etag', false);
app.get('/readyz', (_req, res) => {
  res.json({ status: 'ready' });
});
app.get('/api/v1/sites/:siteId', async (req, res) => {
  const { row } = await limitAndRead(req, req.params.siteId);
  sized(res, 'site', row, sizes.detail);
});
app.get('/api/v1/sites/:siteId/scans', async (req, res) => {
  sizedHistory(res, await limitAndReadHistory(req, req.params.siteId), sizes.history);
});
app.get('/api/v1/sites', async (req, res) => {
  const { row } = await limitAndRead(req, fixedSiteId);
  sized(res, 'sites', row, sizes.list);
});
app.get('/api/v1/webhooks', async (req, res) => {
  const { row } = await limitAndRead(req, fixedSiteId);
  sized(res, 'subscriptions', row, sizes.webhooks);
});

const server = app.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => {
  server.keepAliveTimeout = 65_000;
});

async function stop() {
  await new Promise((resolve) => {
    server.close(() => resolve());
    server.closeIdleConnections?.();
  });
  redis.disconnect();
  await pool.end();
  process.exit(0);
}
process.on('SIGTERM', () => void stop());
process.on('SIGINT', () => void stop());
