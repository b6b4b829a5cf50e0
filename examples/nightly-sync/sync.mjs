// A nightly job a customer could copy: pull every site and the score history completed since the
// last run, append it to a local file, and keep a checkpoint so the next run fetches only what is new.
//
//   SVC_API_KEY=svc_live_… SVC_BASE_URL=https://api.example.com node sync.mjs
//
// Needs a key with read:sites and read:scans. Output: one JSON line per run on stdout.
import { readFile, rename, writeFile, appendFile } from 'node:fs/promises';
import { SiteVisibilityClient } from '@site-visibility/client';

const apiKey = process.env.SVC_API_KEY;
if (!apiKey) {
  console.error('set SVC_API_KEY to a key with read:sites and read:scans');
  process.exit(2);
}
const checkpointFile = process.env.CHECKPOINT_FILE ?? 'checkpoint.json';
const scoresFile = process.env.SCORES_FILE ?? 'scores.jsonl';

const client = new SiteVisibilityClient({
  apiKey,
  baseUrl: process.env.SVC_BASE_URL ?? 'http://localhost:3000',
  onRetry: ({ method, path, retry, delayMs, reason }) => console.error(`retry ${retry} of ${method} ${path} in ${delayMs} ms (${reason})`),
});

/** { [siteId]: completedAt of the newest scan already stored } */
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

const checkpoint = await loadCheckpoint();
let fetched = 0;
const sites = await client.sites.list();
for (const site of sites) {
  const lines = [];
  let newest = checkpoint[site.id];
  for await (const scan of client.scans.history(site.id, { since: checkpoint[site.id] })) {
    lines.push(JSON.stringify({ siteId: site.id, domain: site.domain, scanId: scan.id, score: scan.score, completedAt: scan.completedAt }));
    if (!newest || scan.completedAt > newest) newest = scan.completedAt;
  }
  if (lines.length > 0) await appendFile(scoresFile, `${lines.join('\n')}\n`);
  // The checkpoint moves only after the site's scans are safely stored.
  if (newest) checkpoint[site.id] = newest;
  await saveCheckpoint(checkpoint);
  fetched += lines.length;
}
console.log(JSON.stringify({ sites: sites.length, newScans: fetched }));
