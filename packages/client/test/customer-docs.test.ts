// The service's guides that customers are sent to (the client's README links to them by name):
// nothing in them may point at what a customer cannot read.
import { access, readFile } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from '@jest/globals';

const REPO = fileURLToPath(new URL('../../../../', import.meta.url));
const GUIDES = ['docs/receiving-webhooks.md', 'docs/api-behaviour.md', 'packages/client/README.md'];

describe('the customer-facing guides', () => {
  it.each(GUIDES)('%s names no internal issue, bare specification section or internal package', async (guide) => {
    const lines = (await readFile(resolve(REPO, guide), 'utf8')).split('\n');
    const internal = lines.map((line, i) => `${i + 1}: ${line}`).filter((line) => /\bissue\s+#?\d|§|@svc\/|internal package/i.test(line));
    expect(internal).toEqual([]);
  });

  it.each(GUIDES)('%s links to nothing outside the repository, and to no file that is missing', async (guide) => {
    const text = await readFile(resolve(REPO, guide), 'utf8');
    const targets = [...text.matchAll(/\]\(([^)\s]+)\)/g)].map(([, target]) => target!).filter((target) => !/^(https?:|mailto:|#)/.test(target));
    const broken: string[] = [];
    for (const target of targets) {
      const file = resolve(dirname(resolve(REPO, guide)), target.replace(/#.*$/, ''));
      if (!file.startsWith(REPO)) broken.push(`${target} (outside the repository)`);
      else await access(file).catch(() => broken.push(`${target} (missing)`));
    }
    expect(broken).toEqual([]);
  });
});
