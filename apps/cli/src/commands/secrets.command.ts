import type { Command } from 'commander';
import { REENCRYPT_DEFAULT_BATCH_SIZE, REENCRYPT_MAX_BATCH_SIZE, reencryptSecrets, secretsAtRest, type KeyUsage } from '@svc/core/operator';
import { EXIT_FAILURE } from '../cli-errors.js';
import { parseWholeNumber } from '../options/option-parsers.js';
import { addLeafCommand, type CommandKit } from './command-kit.js';

const plural = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`;

/**
 * `svc secrets reencrypt`: every stored webhook secret (and stored Idempotency-Key answer) sealed
 * with the newest key of SECRETS_ENCRYPTION_KEY, online, in batches. `svc secrets status`: what is
 * sealed with which key, so an old key is removed only once nothing needs it (docs/operations.md).
 */
export function registerSecretsCommands(program: Command, kit: CommandKit): void {
  const secrets = program.command('secrets').description('webhook secrets at rest and SECRETS_ENCRYPTION_KEY');

  addLeafCommand<{ batchSize?: number }>(
    secrets,
    kit,
    {
      name: 'reencrypt',
      description: "seal every stored webhook secret with SECRETS_ENCRYPTION_KEY's first key, in batches, beside running APIs and dispatchers; exits 1 if any row could not be opened",
      configure: (c) =>
        c.option('--batch-size <rows>', `rows per transaction (default ${REENCRYPT_DEFAULT_BATCH_SIZE}, at most ${REENCRYPT_MAX_BATCH_SIZE})`, parseWholeNumber),
    },
    async ({ options, resources }) => {
      const done = await reencryptSecrets(resources.db(), resources.secrets('forReading'), {
        ...(options.batchSize === undefined ? {} : { batchSize: options.batchSize }),
      });
      const answers = done.storedAnswers;
      return {
        json: { ...done },
        lines: [
          `Sealed with key ${done.keyId}: ${plural(done.reencrypted, 'subscription', 'subscriptions')} re-encrypted, ${done.alreadyCurrent} already current, ${done.failed} failed`,
          ...done.failures.map((f) => `  ${f.subscriptionId}: ${f.error}`),
          `Stored Idempotency-Key answers: ${answers.reencrypted} re-encrypted, ${answers.alreadyCurrent} already current, ${answers.failed} failed`,
          ...answers.failures.map((f) => `  account ${f.accountId}, key ${JSON.stringify(f.idempotencyKey)}: ${f.error}`),
        ],
        exitCode: done.failed + answers.failed > 0 ? EXIT_FAILURE : 0,
      };
    },
  );

  addLeafCommand<Record<string, never>>(
    secrets,
    kit,
    {
      name: 'status',
      description: 'count the stored webhook secrets and Idempotency-Key answers under each key id and in plain text',
    },
    async ({ resources }) => {
      const status = await secretsAtRest(resources.db(), resources.secrets('forReading'));
      return {
        json: { ...status },
        lines: [
          status.currentKeyId === null ? 'SECRETS_ENCRYPTION_KEY is not set: new secrets are stored in plain text' : `New secrets are sealed with key ${status.currentKeyId}`,
          ...status.keys.map(describeKey),
          `  plain text   ${plural(status.plaintext.secrets, 'secret', 'secrets')}, ${plural(status.plaintext.storedAnswers, 'stored answer', 'stored answers')}`,
        ],
      };
    },
  );
}

function describeKey(key: KeyUsage): string {
  const role = key.current ? 'current' : key.configured ? 'listed' : 'NOT LISTED';
  const counts = `${plural(key.secrets, 'secret', 'secrets')}, ${plural(key.storedAnswers, 'stored answer', 'stored answers')}`;
  const advice =
    !key.configured ? ' (cannot be opened: list this key again, or these fail)' : !key.current && key.secrets + key.storedAnswers === 0 ? ' (nothing needs it: it can be removed)' : '';
  return `  ${key.keyId}  ${role.padEnd(10)} ${counts}${advice}`;
}
