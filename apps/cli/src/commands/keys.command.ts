import type { Command } from 'commander';
import { revokeApiKeyEverywhere, SCOPES, type ApiKeyListing } from '@svc/core';
import { createApiKey, listApiKeys } from '@svc/core/operator';
import { isoDate } from '../output/command-result.js';
import { parseScopeList, parseText } from '../options/option-parsers.js';
import { addLeafCommand, type CommandKit } from './command-kit.js';

/** `svc keys create|list|revoke`: API keys, of which only the hash is stored. */
export function registerKeysCommands(program: Command, kit: CommandKit): void {
  const keys = program.command('keys').description('API keys of an account');

  addLeafCommand<{ account: string; name: string; scopes: string[] }>(
    keys,
    kit,
    {
      name: 'create',
      description: 'create an API key; the full key is shown only this once',
      configure: (c) =>
        c
          .requiredOption('--account <accountId>', 'the account the key acts for', parseText)
          .requiredOption('--name <name>', 'a name to recognize the key by', parseText)
          .requiredOption('--scopes <scopes>', `comma-separated scopes among ${SCOPES.join(', ')}`, parseScopeList),
    },
    async ({ options, resources }) => {
      const created = await createApiKey(resources.db(), options.account, { name: options.name, scopes: options.scopes });
      return {
        json: {
          id: created.id,
          key: created.key,
          prefix: created.prefix,
          name: created.name,
          scopes: created.scopes,
          createdAt: isoDate(created.createdAt),
        },
        lines: [
          `Created key ${created.id} (${created.name}) with scopes ${created.scopes.join(', ')}`,
          `  key: ${created.key}`,
          'Store the key now: it is not shown again.',
        ],
      };
    },
  );

  addLeafCommand<{ account: string }>(
    keys,
    kit,
    {
      name: 'list',
      description: 'list the keys of an account, newest first (never a full key)',
      configure: (c) => c.requiredOption('--account <accountId>', 'the account whose keys to list', parseText),
    },
    async ({ options, resources }) => {
      const listed = await listApiKeys(resources.db(), options.account);
      return {
        json: { keys: listed.map(toKeyJson) },
        lines: listed.length === 0 ? [`No keys for account ${options.account}`] : listed.map(toKeyLine),
      };
    },
  );

  addLeafCommand<Record<string, never>>(
    keys,
    kit,
    {
      name: 'revoke',
      description: 'revoke a key in every API process at once; revoking it again keeps the first time',
      configure: (c) => c.argument('<keyId>', 'the key to revoke', parseText),
    },
    async ({ args, resources }) => {
      const revoked = await revokeApiKeyEverywhere(
        { db: resources.db(), redis: resources.redis(), prefix: resources.config().queuePrefix },
        args[0] as string,
      );
      return {
        json: { id: revoked.id, revokedAt: isoDate(revoked.revokedAt) },
        lines: [`Revoked key ${revoked.id} at ${isoDate(revoked.revokedAt)}`],
      };
    },
  );
}

function toKeyJson(key: ApiKeyListing): Record<string, unknown> {
  return {
    id: key.id,
    name: key.name,
    prefix: key.prefix,
    scopes: key.scopes,
    createdAt: isoDate(key.createdAt),
    lastUsedAt: isoDate(key.lastUsedAt),
    revokedAt: isoDate(key.revokedAt),
  };
}

function toKeyLine(key: ApiKeyListing): string {
  const state = key.revokedAt ? `revoked ${isoDate(key.revokedAt)}` : 'active';
  const used = key.lastUsedAt ? `last used ${isoDate(key.lastUsedAt)}` : 'never used';
  return `${key.id}  ${key.prefix}…  ${key.name}  [${key.scopes.join(', ')}]  created ${isoDate(key.createdAt)}, ${used}, ${state}`;
}
