import type { Command } from 'commander';
import { listDeliveries, redeliverAnyDelivery, type DeliveryLogEntry } from '@svc/core/operator';
import { isoDate } from '../output/command-result.js';
import { parseText } from '../options/option-parsers.js';
import { addLeafCommand, type CommandKit } from './command-kit.js';

type Attempt = DeliveryLogEntry['attempts'][number];

/**
 * `svc deliveries list --subscription SUBSCRIPTION_ID`: the delivery log, newest first.
 * `svc deliveries redeliver DELIVERY_ID`: a new delivery of the same event to the same subscription.
 */
export function registerDeliveriesCommands(program: Command, kit: CommandKit): void {
  const deliveries = program.command('deliveries').description('webhook deliveries and their attempts');

  addLeafCommand<{ subscription: string }>(
    deliveries,
    kit,
    {
      name: 'list',
      description: 'list the deliveries of a webhook subscription, newest first, with every attempt',
      configure: (c) => c.requiredOption('--subscription <subscriptionId>', 'the webhook subscription', parseText),
    },
    async ({ options, resources }) => {
      const entries = await listDeliveries(resources.db(), options.subscription);
      return {
        json: { deliveries: entries.map(toDeliveryJson) },
        lines:
          entries.length === 0
            ? [`No deliveries for subscription ${options.subscription}`]
            : entries.flatMap((entry) => [toDeliveryLine(entry), ...entry.attempts.map(toAttemptLine)]),
      };
    },
  );

  addLeafCommand<Record<string, never>>(
    deliveries,
    kit,
    {
      name: 'redeliver',
      description: 'deliver a delivery’s event again to its subscription, as a new delivery with its own 7 attempts',
      configure: (c) => c.argument('<deliveryId>', 'the delivery to redeliver (any account’s)', parseText),
    },
    async ({ args, resources }) => {
      const { delivery, subscriptionId } = await redeliverAnyDelivery(resources.redeliveryDeps(), args[0] as string);
      return {
        json: {
          id: delivery.id,
          subscriptionId,
          eventId: delivery.eventId,
          event: delivery.event,
          status: delivery.status,
          createdAt: isoDate(delivery.createdAt),
          nextAttemptAt: isoDate(delivery.nextAttemptAt),
          redeliveryOf: delivery.redeliveryOf,
        },
        lines: [
          `Queued redelivery ${delivery.id} of ${delivery.redeliveryOf} (${delivery.event}, event ${delivery.eventId}) to subscription ${subscriptionId}`,
        ],
      };
    },
  );
}

function toDeliveryJson(entry: DeliveryLogEntry): Record<string, unknown> {
  return {
    id: entry.id,
    eventId: entry.eventId,
    event: entry.event,
    status: entry.status,
    createdAt: isoDate(entry.createdAt),
    nextAttemptAt: isoDate(entry.nextAttemptAt),
    failureReason: entry.failureReason,
    redeliveryOf: entry.redeliveryOf,
    attempts: entry.attempts.map((attempt) => ({
      n: attempt.n,
      at: isoDate(attempt.at),
      statusCode: attempt.statusCode,
      error: attempt.error,
      durationMs: attempt.durationMs,
      responseExcerpt: attempt.responseExcerpt,
      responseExcerptBase64: attempt.responseExcerptBase64,
    })),
  };
}

function toDeliveryLine(entry: DeliveryLogEntry): string {
  const next = entry.status === 'pending' && entry.nextAttemptAt ? `, next attempt ${isoDate(entry.nextAttemptAt)}` : '';
  const reason = entry.failureReason ? ` (${entry.failureReason})` : '';
  const redelivery = entry.redeliveryOf ? `, redelivery of ${entry.redeliveryOf}` : '';
  return `${entry.id}  ${entry.event}  ${entry.status}${reason}  event ${entry.eventId}  created ${isoDate(entry.createdAt)}${redelivery}${next}`;
}

function toAttemptLine(attempt: Attempt): string {
  const status = attempt.statusCode === null ? null : `HTTP ${attempt.statusCode}`;
  // The dispatcher records a plain non-2xx answer as the error "HTTP <code>": say it once.
  const outcome = [status, attempt.error === status ? null : attempt.error].filter(Boolean).join(', ') || 'no response';
  return `  #${attempt.n} ${isoDate(attempt.at)}  ${outcome}  ${attempt.durationMs} ms`;
}
