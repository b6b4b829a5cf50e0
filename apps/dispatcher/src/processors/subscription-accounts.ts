import { type Db } from '@svc/core';
import { findSubscriptionAccounts, MicroBatcher } from '@svc/core/dispatcher';

/** Subscriptions whose account this process remembers; past it the oldest are forgotten (and read again if needed). */
const REMEMBERED = 50_000;

/**
 * The account of a delivery job's subscription, for the fair share of slots. A subscription never
 * changes account, so each is read once (the reads of one turn of the event loop share a query)
 * and remembered. A subscription that no longer exists answers its own id: a share of its own,
 * until its claim finds it gone.
 */
export class SubscriptionAccounts {
  private readonly known = new Map<string, string>();
  private readonly reads: MicroBatcher<string, string>;

  constructor(db: Db) {
    this.reads = new MicroBatcher<string, string>(
      async (ids) => {
        const accounts = await findSubscriptionAccounts(db, ids);
        return ids.map((id) => accounts.get(id) ?? id);
      },
      { maxBatch: 500, maxInFlight: 2 },
    );
  }

  /** How long reads have waited with none answered (MicroBatcher.stalledForMs). */
  stalledForMs(): number {
    return this.reads.stalledForMs();
  }

  async accountOf(subscriptionId: string): Promise<string> {
    const known = this.known.get(subscriptionId);
    if (known !== undefined) return known;
    const accountId = await this.reads.submit(subscriptionId);
    if (accountId !== subscriptionId) {
      if (this.known.size >= REMEMBERED) this.known.delete(this.known.keys().next().value as string);
      this.known.set(subscriptionId, accountId);
    }
    return accountId;
  }
}
