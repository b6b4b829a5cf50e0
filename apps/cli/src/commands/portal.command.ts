import type { Command } from 'commander';
import { createSettingsLink, SETTINGS_LINK_DEFAULT_TTL_SECONDS, SETTINGS_LINK_MAX_TTL_SECONDS } from '@svc/core/operator';
import { isoDate } from '../output/command-result.js';
import { parseSeconds, parseText } from '../options/option-parsers.js';
import { addLeafCommand, type CommandKit } from './command-kit.js';

/** `svc portal link`: a single-use sign-in link to an account's Settings (docs/settings.md). */
export function registerPortalCommands(program: Command, kit: CommandKit): void {
  const portal = program.command('portal').description("the account owner's Settings in the browser");

  addLeafCommand<{ account: string; ttl?: number }>(
    portal,
    kit,
    {
      name: 'link',
      description: `print a single-use link that signs the account's owner in to Settings: { "url", "expiresAt" }`,
      configure: (c) =>
        c
          .requiredOption('--account <accountId>', 'the account whose Settings the link opens', parseText)
          .option('--ttl <seconds>', `how long the link can be used (default ${SETTINGS_LINK_DEFAULT_TTL_SECONDS}, at most ${SETTINGS_LINK_MAX_TTL_SECONDS})`, parseSeconds),
    },
    async ({ options, resources }) => {
      const link = await createSettingsLink(resources.db(), {
        accountId: options.account,
        baseUrl: resources.config().publicBaseUrl,
        ...(options.ttl === undefined ? {} : { ttlSeconds: options.ttl }),
      });
      const json = { url: link.url, expiresAt: isoDate(link.expiresAt) };
      // The object is the output either way: the main product's scripts read it.
      return { json, lines: [JSON.stringify(json)] };
    },
  );
}
