import { readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startApi, type ListeningApi } from './support.js';

// The generator is plain ESM beside the package (scripts/), one level above dist/.
const generator = new URL('../../scripts/generate-types.mjs', import.meta.url).href;

let api: ListeningApi;

beforeAll(async () => {
  api = await startApi();
});
afterAll(async () => {
  await api.close();
});

describe('the client’s generated types', () => {
  it('match the OpenAPI document the API serves at /openapi.json (run `npm run generate -w packages/client` when this fails)', async () => {
    const { generateTypes, GENERATED_FILE } = (await import(generator)) as {
      generateTypes(document: unknown): Promise<string>;
      GENERATED_FILE: string;
    };
    const served = await (await fetch(`${api.baseUrl}/openapi.json`)).json();

    const expected = await generateTypes(served);
    const committed = await readFile(GENERATED_FILE, 'utf8');

    expect(committed).toBe(expected);
  });
});
