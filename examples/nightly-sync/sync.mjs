// A nightly job a customer could copy: pull every site and the score history completed since the
// last run, append it to a local file, and keep a checkpoint so the next run fetches only what is new.
//
//   SVC_API_KEY=svc_live_… SVC_BASE_URL=https://api.example.com node sync.mjs
//
// Needs a key with read:sites and read:scans. Output: one JSON line per run on stdout.
import { readFile, rename, writeFile, appendFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { SiteVisibilityClient } from '@site-visibility/client';

const apiKey = process.env.SVC_API_KEY;
if (!apiKey) {
  console.error('set SVC_API_KEY to a key with read:sites and read:scans');
  process.exit(2);
}
// Beside this script unless told otherwise, wherever it is run from.
const checkpointFile = process.env.CHECKPOINT_FILE ?? fileURLToPath(new URL('checkpoint.json', import.meta.url));
const scoresFile = process.env.SCORES_FILE ?? fileURLToPath(new URL('scores.jsonl', import.meta.url));

const client = new SiteVisibilityClient({
  apiKey,
  baseUrl: process.env.SVC_BASE_URL ?? 'http://localhost:3000',
  onRetry: ({ method, path, retry, delayMs, reason }) => console.error(`retry ${retry} of ${method} ${path} in ${delayMs} ms (${reason})`),
});

/**
 * { [siteId]: { newest, recent } }: the newest completedAt already stored, and the ids stored
 * within OVERLAP_MS of it. A scan's completedAt is stamped when its transaction starts, so one
 * that commits a moment later can carry a slightly earlier time than one already fetched: each
 * run asks again from OVERLAP_MS before the checkpoint and drops the ids it already has.
 */
async function loadCheckpoint() {
  try {
    return JSON.parse(await readFile(checkpointFile, 'utf8'));
  } catch (error) {
    if (error.code === 'ENOENT') return {};
    throw error;
  }
}

async function saveCheckpoint(checkpoint) {
  // Write then rename: a crash mid-write never leaves a half checkpoint behind.
  await writeFile(`${checkpointFile}.tmp`, JSON.stringify(checkpoint, null, 2));
  await rename(`${checkpointFile}.tmp`, checkpointFile);
}

const OVERLAP_MS = 60_000;
const checkpoint = await loadCheckpoint();
let total = 0;
const sites = await client.sites.list();
for (const site of sites) {
  const previous = checkpoint[site.id] ?? { newest: null, recent: {} };
  const since = previous.newest ? new Date(Date.parse(previous.newest) - OVERLAP_MS) : undefined;
  const fetched = [];
  for await (const scan of client.scans.history(site.id, { since })) {
    if (!(scan.id in previous.recent)) fetched.push(scan);
  }
  if (fetched.length > 0) {
    const lines = fetched.map((scan) => JSON.stringify({ siteId: site.id, domain: site.domain, scanId: scan.id, score: scan.score, completedAt: scan.completedAt }));
    await appendFile(scoresFile, `${lines.join('\n')}\n`);
    // The checkpoint moves only after the site's scans are safely stored.
    const seen = { ...previous.recent, ...Object.fromEntries(fetched.map((scan) => [scan.id, scan.completedAt])) };
    const newest = Object.values(seen).reduce((max, at) => (at > max ? at : max));
    const floor = Date.parse(newest) - OVERLAP_MS;
    const recent = Object.fromEntries(Object.entries(seen).filter(([, at]) => Date.parse(at) >= floor));
    checkpoint[site.id] = { newest, recent };
    await saveCheckpoint(checkpoint);
  }
  total += fetched.length;
}
console.log(JSON.stringify({ sites: sites.length, newScans: total }));
