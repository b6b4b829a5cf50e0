import type { Command } from 'commander';
import { deployPowerUp } from '@svc/core';
import { parseText } from '../options/option-parsers.js';
import { addLeafCommand, type CommandKit } from './command-kit.js';

/** `svc power-ups deploy --site SITE_ID --power-up POWER_UP_ID [--idempotency-key KEY]`: fires power_up.deployed. */
export function registerPowerUpsCommands(program: Command, kit: CommandKit): void {
  const powerUps = program.command('power-ups').description('Power-Up deployments on a site');

  addLeafCommand<{ site: string; powerUp: string; idempotencyKey?: string }>(
    powerUps,
    kit,
    {
      name: 'deploy',
      description: 'record a successful Power-Up deployment; fires power_up.deployed',
      configure: (c) =>
        c
          .requiredOption('--site <siteId>', 'the site the Power-Up was deployed on', parseText)
          .requiredOption('--power-up <powerUpId>', 'the Power-Up deployed', parseText)
          .option('--idempotency-key <key>', 'names the call: run again with the same key (after a lost connection, say), it records nothing twice and prints what was recorded', parseText),
    },
    async ({ options, resources }) => {
      const { deployment, eventId } = await deployPowerUp(resources.producerDeps(), {
        siteId: options.site,
        powerUpId: options.powerUp,
        ...(options.idempotencyKey === undefined ? {} : { idempotencyKey: options.idempotencyKey }),
      });
      return {
        json: { id: deployment.id, eventId },
        lines: [
          `Recorded deployment ${deployment.id} of Power-Up ${deployment.powerUpId} on site ${deployment.siteId}`,
          `  event: ${eventId} (power_up.deployed)`,
        ],
      };
    },
  );
}
