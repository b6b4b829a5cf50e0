import { describe, expect, it } from '@jest/globals';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as core from '../src/index.js';
import * as dispatcher from '../src/dispatcher.js';
import * as operator from '../src/operator.js';

// packages/core/dist/test → the repository.
const ROOT = fileURLToPath(new URL('../../../../', import.meta.url));

/** Every `@svc/core…` module a TypeScript source under `dir` imports, with the file. */
function coreImports(dir: string): Array<{ file: string; entry: string }> {
  const found: Array<{ file: string; entry: string }> = [];
  for (const entry of readdirSync(join(ROOT, dir), { withFileTypes: true, recursive: true })) {
    if (!entry.isFile() || !entry.name.endsWith('.ts')) continue;
    const file = join(entry.parentPath, entry.name);
    for (const match of readFileSync(file, 'utf8').matchAll(/from '(@svc\/core[^']*)'|import\('(@svc\/core[^']*)'\)/g)) {
      found.push({ file: file.slice(ROOT.length), entry: match[1] ?? match[2]! });
    }
  }
  return found;
}

describe('the entry points of @svc/core keep each process to its own functions', () => {
  it('the API imports only the main entry, whose data functions are bound to an account', () => {
    const imports = coreImports('apps/api/src');

    expect(imports.length).toBeGreaterThan(10);
    expect(imports.filter((i) => i.entry !== '@svc/core')).toEqual([]);
    expect(typeof core.forAccount).toBe('function');
    // Functions that take any account's ids are not reachable from the main entry.
    for (const name of ['createSubscription', 'listSitesAsJsonArray', 'getScan', 'listSubscriptionDeliveries', 'createApiKey', 'listDeliveries', 'redeliverAnyDelivery', 'claimAttempts', 'recordAttempts', 'fanOutEventsInPages', 'purgeExpiredHistory']) {
      expect({ name, inMain: name in core }).toEqual({ name, inMain: false });
    }
    expect(typeof operator.createSubscription).toBe('function');
    expect(typeof operator.redeliverAnyDelivery).toBe('function');
    expect(typeof dispatcher.claimAttempts).toBe('function');
    expect(typeof dispatcher.recordAttempts).toBe('function');
  });

  it('the dispatcher never imports the operator entry, and svc never the dispatcher’s', () => {
    expect(coreImports('apps/dispatcher/src').filter((i) => i.entry === '@svc/core/operator' || i.entry === '@svc/core/testing')).toEqual([]);
    expect(coreImports('apps/cli/src').filter((i) => i.entry === '@svc/core/dispatcher' || i.entry === '@svc/core/testing')).toEqual([]);
  });
});
