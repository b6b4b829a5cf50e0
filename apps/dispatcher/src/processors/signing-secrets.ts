import { SecretUnavailableError, type Logger, type SecretBox } from '@svc/core';
import { openClaimedAttempt, type ClaimedAttempt, type StoredAttempt } from '@svc/core/dispatcher';

/**
 * Opens each claimed attempt's secrets just before it is signed. AES-GCM opens a secret in about
 * 4 µs (ADR 16), so nothing is cached. A secret that cannot be opened fails that attempt: the
 * caller records it as it records a network error (retried on the schedule, shown in the delivery
 * log) and sends nothing. It is logged at `error` once per key id and reason in this process:
 * every attempt of every subscription sealed under a removed key would otherwise log it again.
 */
export class SigningSecrets {
  private readonly reported = new Set<string>();

  constructor(
    private readonly secrets: SecretBox,
    private readonly logger: Pick<Logger, 'error'>,
  ) {}

  /** The attempt ready to sign, or why its secrets cannot be opened (for the attempt's error). */
  open(attempt: StoredAttempt): { attempt: ClaimedAttempt } | { unavailable: string } {
    try {
      return { attempt: openClaimedAttempt(attempt, this.secrets) };
    } catch (error) {
      if (!(error instanceof SecretUnavailableError)) throw error;
      const once = `${error.reason} ${error.keyId}`;
      if (!this.reported.has(once)) {
        this.reported.add(once);
        this.logger.error('webhook secret cannot be decrypted: its attempts fail, unsent, until it can be', {
          keyId: error.keyId,
          reason: error.reason,
          configuredKeyIds: this.secrets.keyIds(),
          subscriptionId: attempt.subscriptionId,
          deliveryId: attempt.deliveryId,
          error: error.message,
        });
      }
      return { unavailable: error.message };
    }
  }
}
