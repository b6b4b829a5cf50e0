import { Option, type Command } from 'commander';
import { SITE_STATUSES } from '@svc/core';
import { createSite } from '@svc/core/operator';
import { isoDate } from '../output/command-result.js';
import { parseText } from '../options/option-parsers.js';
import { addLeafCommand, type CommandKit } from './command-kit.js';

/** `svc sites add --account ACCOUNT_ID --domain DOMAIN [--name NAME] [--status STATUS]` */
export function registerSitesCommands(program: Command, kit: CommandKit): void {
  const sites = program.command('sites').description('the sites an account scores');

  addLeafCommand<{ account: string; domain: string; name?: string; status?: string }>(
    sites,
    kit,
    {
      name: 'add',
      description: 'add a site to an account; the domain is stored normalized (no protocol, no www., lower case)',
      configure: (c) =>
        c
          .requiredOption('--account <accountId>', 'the account that owns the site', parseText)
          .requiredOption('--domain <domain>', 'the site’s domain, e.g. https://www.Example.com/', parseText)
          .option('--name <name>', 'display name')
          .addOption(new Option('--status <status>', 'the site’s status (default: active)').choices(SITE_STATUSES)),
    },
    async ({ options, resources }) => {
      const site = await createSite(resources.db(), options.account, {
        domain: options.domain,
        name: options.name ?? null,
        ...(options.status === undefined ? {} : { status: options.status }),
      });
      return {
        json: { id: site.id, domain: site.domain, name: site.name, status: site.status, createdAt: isoDate(site.createdAt) },
        lines: [
          `Added site ${site.id}`,
          `  domain: ${site.domain}`,
          `  name:   ${site.name ?? '(none)'}`,
          `  status: ${site.status}`,
        ],
      };
    },
  );
}
