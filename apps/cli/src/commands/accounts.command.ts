import type { Command } from 'commander';
import { createAccount } from '@svc/core/operator';
import { parseText } from '../options/option-parsers.js';
import { addLeafCommand, type CommandKit } from './command-kit.js';

/** `svc accounts create --name NAME` */
export function registerAccountsCommands(program: Command, kit: CommandKit): void {
  const accounts = program.command('accounts').description('accounts that own sites, keys and webhooks');

  addLeafCommand<{ name: string }>(
    accounts,
    kit,
    {
      name: 'create',
      description: 'create an account',
      configure: (c) => c.requiredOption('--name <name>', 'the account’s name', parseText),
    },
    async ({ options, resources }) => {
      const account = await createAccount(resources.db(), { name: options.name });
      return {
        json: { id: account.id },
        lines: [`Created account ${account.id} (${account.name})`],
      };
    },
  );
}
