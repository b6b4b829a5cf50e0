import type { Command } from 'commander';
import { DEFAULT_ROTATION_OVERLAP_SECONDS, InputError, MAX_ROTATION_OVERLAP_SECONDS, RECOVERY_MAX, standardWebhooksSecret, type SubscriptionListing } from '@svc/core';
import { recoverSubscriptionDeliveries, rotateSubscriptionSecret, subscriptionAccountId, updateSubscription } from '@svc/core/operator';
import { isoDate } from '../output/command-result.js';
import { parseText } from '../options/option-parsers.js';
import { addLeafCommand, type CommandKit } from './command-kit.js';
import { parseEventList, parseInstant, parseOverlapSeconds, parseWebhookUrl } from './webhook-rules.js';

/**
 * `svc webhooks rotate-secret|recover|update SUBSCRIPTION_ID`: any account's subscription, through
 * the same core functions as the API's POST …/rotate-secret, POST …/recover and PATCH, with the
 * API's rules for their input (webhook-rules.ts).
 */
export function registerWebhooksCommands(program: Command, kit: CommandKit): void {
  const webhooks = program.command('webhooks').description('webhook subscriptions of any account');
  const subscriptionArgument = (c: Command) => c.argument('<subscriptionId>', 'the webhook subscription (any account’s)', parseText);

  addLeafCommand<{ overlap?: number }>(
    webhooks,
    kit,
    {
      name: 'rotate-secret',
      description: 'give a subscription a new secret, shown only this once; the old one keeps signing beside it for --overlap seconds',
      configure: (c) =>
        subscriptionArgument(c).option(
          '--overlap <seconds>',
          `how long the replaced secret keeps signing beside the new one (default ${DEFAULT_ROTATION_OVERLAP_SECONDS}, at most ${MAX_ROTATION_OVERLAP_SECONDS}; 0 ends it at once)`,
          parseOverlapSeconds,
        ),
    },
    async ({ args, options, resources }) => {
      const subscriptionId = args[0] as string;
      const db = resources.db();
      const accountId = await subscriptionAccountId(db, subscriptionId);
      const rotated = await rotateSubscriptionSecret(db, accountId, subscriptionId, options.overlap ?? DEFAULT_ROTATION_OVERLAP_SECONDS, resources.secrets('forWriting'));
      const whsec = standardWebhooksSecret(rotated.secret);
      const until = isoDate(rotated.previousSecretExpiresAt);
      return {
        json: { id: rotated.id, accountId, secret: rotated.secret, standardWebhooksSecret: whsec, previousSecretExpiresAt: until },
        lines: [
          `Rotated the secret of subscription ${rotated.id} (account ${accountId})`,
          `  secret: ${rotated.secret}`,
          `  standardWebhooksSecret: ${whsec}`,
          until === null ? 'The previous secret signs nothing from now on.' : `The previous secret also signs every attempt until ${until}.`,
          'Hand the new secret to the subscription’s owner now: it is not shown again.',
        ],
      };
    },
  );

  addLeafCommand<{ since: Date; until?: Date; dryRun?: boolean }>(
    webhooks,
    kit,
    {
      name: 'recover',
      description: `send again, as new deliveries, the subscription's deliveries that failed for good between --since and --until (at most ${RECOVERY_MAX})`,
      configure: (c) =>
        subscriptionArgument(c)
          .requiredOption('--since <time>', 'failures at or after this ISO 8601 time with its offset (2026-11-20T00:00:00Z)', parseInstant)
          .option('--until <time>', 'failures before this ISO 8601 time (default: now)', parseInstant)
          .option('--dry-run', 'only count what would be sent'),
    },
    async ({ args, options, resources }) => {
      const subscriptionId = args[0] as string;
      const since = options.since;
      const until = options.until ?? new Date();
      if (!(until.getTime() > since.getTime())) throw new InputError('--until must be after --since (--until is now when it is absent)');
      const dryRun = options.dryRun === true;
      const accountId = await subscriptionAccountId(resources.db(), subscriptionId);
      const recovery = await recoverSubscriptionDeliveries(resources.redeliveryDeps(), accountId, subscriptionId, { since, until, dryRun });
      const window = `between ${isoDate(recovery.since)} and ${isoDate(recovery.until)}`;
      const deliveries = `${recovery.count} ${recovery.count === 1 ? 'delivery' : 'deliveries'}`;
      return {
        json: { subscriptionId, accountId, count: recovery.count, since: isoDate(recovery.since), until: isoDate(recovery.until), dryRun },
        lines: [
          dryRun
            ? `Dry run: ${deliveries} of subscription ${subscriptionId} that failed ${window} would be sent again; nothing was sent`
            : `Queued ${deliveries} of subscription ${subscriptionId} that failed ${window}, each again as a new delivery`,
        ],
      };
    },
  );

  addLeafCommand<{ url?: string; events?: string[] }>(
    webhooks,
    kit,
    {
      name: 'update',
      description: 'change a subscription’s url or events, or both; its history, failure count and secret stay',
      configure: (c) =>
        subscriptionArgument(c)
          .option('--url <url>', 'the new url: https://, at most 500 characters', parseWebhookUrl)
          .option('--events <events>', 'comma-separated event types (scan.completed, ai_check.completed, power_up.deployed), or * alone', parseEventList),
    },
    async ({ args, options, resources }) => {
      const subscriptionId = args[0] as string;
      if (options.url === undefined && options.events === undefined) throw new InputError('give --url or --events, or both');
      const db = resources.db();
      const accountId = await subscriptionAccountId(db, subscriptionId);
      const updated = await updateSubscription(db, accountId, subscriptionId, {
        ...(options.url === undefined ? {} : { url: options.url }),
        ...(options.events === undefined ? {} : { events: options.events }),
      });
      return { json: { ...toSubscriptionJson(updated), accountId }, lines: [toSubscriptionLine(updated, accountId)] };
    },
  );
}

/** The subscription as the API lists it (spec §4.4). */
function toSubscriptionJson(sub: SubscriptionListing): Record<string, unknown> {
  return {
    id: sub.id,
    url: sub.url,
    events: sub.events,
    createdAt: isoDate(sub.createdAt),
    lastDeliveryAt: isoDate(sub.lastDeliveryAt),
    failureCount: sub.failureCount,
    status: sub.status,
  };
}

function toSubscriptionLine(sub: SubscriptionListing, accountId: string): string {
  const delivered = sub.lastDeliveryAt ? `last delivered ${isoDate(sub.lastDeliveryAt)}` : 'never delivered';
  return `Updated subscription ${sub.id} (account ${accountId}): ${sub.url}  [${sub.events.join(', ')}]  ${sub.status}, ${delivered}, failureCount ${sub.failureCount}`;
}
